// libFuzzer driver: build with clang and -DKVFOLD_BUILD_FUZZERS=ON, e.g.
//   CXX=clang++ cmake -S . -B build-fuzz -DKVFOLD_BUILD_FUZZERS=ON && cmake --build build-fuzz
//   build-fuzz/tests/fuzz_manifest_frame -max_total_time=60
// KVFOLD_FUZZ_TARGET (a compile definition) names the function to drive.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvfold::fuzz::KVFOLD_FUZZ_TARGET(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
