#include "artifact/chunk_codec.h"

#include <zstd.h>

#include "artifact.pb.h"
#include "kvfold/scope.h"

namespace kvfold::artifact {

namespace {
constexpr int kZstdLevel = 3;
}  // namespace

namespace {

uint64_t VarintBytes(uint64_t v) {
  uint64_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

}  // namespace

Status CheckArtifactKey(std::string_view key) { return ValidateKey(key); }

uint64_t RecordBytes(std::string_view key, uint64_t revision, std::string_view value) {
  // ChunkRecord in proto3 wire form: one tag byte per non-default field.
  const uint64_t body = (key.empty() ? 0 : 1 + VarintBytes(key.size()) + key.size()) +
                        (revision == 0 ? 0 : 1 + VarintBytes(revision)) +
                        (value.empty() ? 0 : 1 + VarintBytes(value.size()) + value.size());
  return VarintBytes(body) + body;
}

namespace {

void AppendVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

}  // namespace

// The ChunkRecord's proto3 wire bytes, written directly (the same bytes
// SerializeAsString gives, without copying key and value into a message
// first; the golden artifacts pin them).
void AppendRecord(std::string* raw, std::string_view key, uint64_t revision,
                  std::string_view value) {
  const uint64_t total = RecordBytes(key, revision, value);
  raw->reserve(raw->size() + total);
  const uint64_t body = (key.empty() ? 0 : 1 + VarintBytes(key.size()) + key.size()) +
                        (revision == 0 ? 0 : 1 + VarintBytes(revision)) +
                        (value.empty() ? 0 : 1 + VarintBytes(value.size()) + value.size());
  AppendVarint(raw, body);
  if (!key.empty()) {
    raw->push_back('\x0a');  // field 1, length-delimited
    AppendVarint(raw, key.size());
    raw->append(key);
  }
  if (revision != 0) {
    raw->push_back('\x10');  // field 2, varint
    AppendVarint(raw, revision);
  }
  if (!value.empty()) {
    raw->push_back('\x1a');  // field 3, length-delimited
    AppendVarint(raw, value.size());
    raw->append(value);
  }
}

Status ForEachRecord(std::string_view raw, const std::string& what,
                     const std::function<Status(std::string_view, uint64_t, std::string_view)>& fn) {
  ::kvfold::wire::ChunkRecord r;
  uint64_t index = 0;
  while (!raw.empty()) {
    uint64_t n = 0;
    int shift = 0;
    size_t used = 0;
    while (true) {
      if (used >= raw.size() || shift > 28) {
        return Status::Corruption(what + ": record " + std::to_string(index) +
                                  " has a bad length prefix");
      }
      const auto b = static_cast<uint8_t>(raw[used++]);
      n |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) break;
      shift += 7;
    }
    if (raw.size() - used < n) {
      return Status::Corruption(what + ": record " + std::to_string(index) + " is cut short");
    }
    if (!r.ParseFromArray(raw.data() + used, static_cast<int>(n))) {
      return Status::Corruption(what + ": record " + std::to_string(index) + " does not decode");
    }
    KVFOLD_RETURN_IF_ERROR(fn(r.key(), r.revision(), r.value()));
    raw.remove_prefix(used + n);
    ++index;
  }
  return Status::OK();
}

std::string Compress(std::string_view raw) {
  std::string out(ZSTD_compressBound(raw.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), kZstdLevel);
  out.resize(ZSTD_isError(n) ? 0 : n);
  return out;
}

StatusOr<std::string> Decompress(std::string_view compressed, uint64_t raw_size,
                                 const std::string& what) {
  if (raw_size > kMaxChunkRawBytes) {
    return Status::Corruption(what + " claims " + std::to_string(raw_size) +
                              " raw bytes, more than the " + std::to_string(kMaxChunkRawBytes) +
                              " a chunk may hold");
  }
  const unsigned long long framed = ZSTD_getFrameContentSize(compressed.data(), compressed.size());
  if (framed == ZSTD_CONTENTSIZE_ERROR || framed == ZSTD_CONTENTSIZE_UNKNOWN) {
    return Status::Corruption(what + " is not a complete zstd frame");
  }
  if (framed != raw_size) {
    return Status::Corruption(what + " decompresses to " + std::to_string(framed) +
                              " bytes, manifest says " + std::to_string(raw_size));
  }
  std::string out(raw_size, '\0');
  const size_t n = ZSTD_decompress(out.data(), out.size(), compressed.data(), compressed.size());
  if (ZSTD_isError(n) || n != raw_size) {
    return Status::Corruption(what + " does not decompress: " +
                              (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short output"));
  }
  return out;
}

}  // namespace kvfold::artifact
