// Chunk objects: a zstd frame holding varint-length-prefixed ChunkRecord
// messages in key order. See artifacts/FORMAT.md.

#ifndef KVFOLD_ARTIFACT_CHUNK_CODEC_H_
#define KVFOLD_ARTIFACT_CHUNK_CODEC_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "kvfold/status.h"

namespace kvfold::artifact {

// What an artifact may hold: one definition for the exporter and every
// reader, so an export never publishes what its own readers reject.
//
// The largest raw chunk (record stream) a reader accepts; bounds memory
// whatever a manifest says. One record must fit in it too.
inline constexpr uint64_t kMaxChunkRawBytes = uint64_t{64} << 20;
// The largest stored (compressed) chunk: what zstd makes of the largest raw
// chunk at worst (ZSTD_COMPRESSBOUND), a little over 64 MiB.
inline constexpr uint64_t kMaxChunkStoredBytes = kMaxChunkRawBytes + (kMaxChunkRawBytes >> 8);

// OK when an artifact of schema `min_reader_version` may hold `key`: from
// kArtifactSchemaAnyKey on, any non-empty key (a fold holds every key a
// subject can carry); before, only a valid KV key (ValidateKey:
// [-/_=.a-zA-Z0-9], no trailing '.'). InvalidArgument naming the fault
// otherwise.
Status CheckArtifactKey(std::string_view key, uint32_t min_reader_version);

// The bytes AppendRecord adds for this record (length prefix included).
uint64_t RecordBytes(std::string_view key, uint64_t revision, std::string_view value,
                     int64_t expires_ns = 0);

// `expires_ns` > 0: the entry's deadline (Entry::expires_ns, field 4).
void AppendRecord(std::string* raw, std::string_view key, uint64_t revision, std::string_view value,
                  int64_t expires_ns = 0);

// Calls fn for each record of `raw` in order. Corruption when a record is
// cut short or does not decode.
// Reads one ChunkRecord body (no length prefix) in place: key and value
// are views into `body`. False when the bytes do not decode.
bool ParseChunkRecord(std::string_view body, std::string_view* key, uint64_t* revision,
                      std::string_view* value, int64_t* expires_ns = nullptr);

// `expires_ns`: the record's deadline, 0 for none.
Status ForEachRecord(std::string_view raw, const std::string& what,
                     const std::function<Status(std::string_view key, uint64_t revision,
                                                std::string_view value, int64_t expires_ns)>& fn);

std::string Compress(std::string_view raw);

// Decompresses a frame that must hold exactly `raw_size` bytes.
StatusOr<std::string> Decompress(std::string_view compressed, uint64_t raw_size,
                                 const std::string& what);

}  // namespace kvfold::artifact

#endif  // KVFOLD_ARTIFACT_CHUNK_CODEC_H_
