// One entry point per parser of untrusted bytes. Each must return for any
// input without crashing, leaking or reading out of bounds (the sanitizers
// judge); a decode error is a fine outcome. Driven by libFuzzer
// (libfuzzer_main.cc, clang builds) and by parser_robustness_test.cc
// (random mutations of valid inputs, every CI run under ASan+UBSan).

#ifndef KVFOLD_TESTS_FUZZ_FUZZ_TARGETS_H_
#define KVFOLD_TESTS_FUZZ_FUZZ_TARGETS_H_

#include <string_view>

namespace kvfold::fuzz {

void ManifestFrame(std::string_view bytes);  // artifact manifest object
// The bytes as a manifest envelope sealed in a valid frame: past the
// frame's SHA-256, which random bytes never match, into the envelope's and
// the manifest's decoding and checks.
void ManifestEnvelope(std::string_view bytes);
void ChunkObject(std::string_view bytes);   // zstd frame + records
void ChunkRecords(std::string_view bytes);  // raw record stream
void Pointer(std::string_view bytes);       // LATEST pointer JSON
void ObjectMeta(std::string_view bytes);    // object store meta JSON
void LeaseRecord(std::string_view bytes);   // export lease JSON
void FoldRecord(std::string_view bytes);    // fold entry / meta values
void AckReply(std::string_view bytes);      // JetStream ack reply subject
void Base64(std::string_view bytes);
void ObjectName(std::string_view bytes);  // object names a location lists

}  // namespace kvfold::fuzz

#endif  // KVFOLD_TESTS_FUZZ_FUZZ_TARGETS_H_
