#include "artifact/chunk_codec.h"

#include <zstd.h>

#include <algorithm>

#include "artifact.pb.h"
#include "kvfold/artifact.h"
#include "kvfold/scope.h"

namespace kvfold::artifact {

namespace {
constexpr int kZstdLevel = 3;
static_assert(kMaxChunkStoredBytes == ZSTD_COMPRESSBOUND(kMaxChunkRawBytes));
}  // namespace

namespace {

uint64_t VarintBytes(uint64_t v) {
  uint64_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

}  // namespace

Status CheckArtifactKey(std::string_view key, uint32_t min_reader_version) {
  if (min_reader_version < kArtifactSchemaAnyKey) return ValidateKey(key);
  if (key.empty()) return Status::InvalidArgument("key is empty");
  return Status::OK();
}

namespace {

// The ChunkRecord body's size: one tag byte per non-default field.
uint64_t BodyBytes(std::string_view key, uint64_t revision, std::string_view value,
                   int64_t expires_ns) {
  return (key.empty() ? 0 : 1 + VarintBytes(key.size()) + key.size()) +
         (revision == 0 ? 0 : 1 + VarintBytes(revision)) +
         (value.empty() ? 0 : 1 + VarintBytes(value.size()) + value.size()) +
         (expires_ns <= 0 ? 0 : 1 + VarintBytes(static_cast<uint64_t>(expires_ns)));
}

}  // namespace

uint64_t RecordBytes(std::string_view key, uint64_t revision, std::string_view value,
                     int64_t expires_ns) {
  const uint64_t body = BodyBytes(key, revision, value, expires_ns);
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
void AppendRecord(std::string* raw, std::string_view key, uint64_t revision, std::string_view value,
                  int64_t expires_ns) {
  const uint64_t total = RecordBytes(key, revision, value, expires_ns);
  raw->reserve(raw->size() + total);
  const uint64_t body = BodyBytes(key, revision, value, expires_ns);
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
  if (expires_ns > 0) {
    raw->push_back('\x20');  // field 4, varint
    AppendVarint(raw, static_cast<uint64_t>(expires_ns));
  }
}

namespace {

// At most `max_bytes` bytes: 10 for a 64-bit value, 5 for a tag or a
// length (as protobuf reads them).
bool ReadVarint(std::string_view in, size_t* pos, uint64_t* out, int max_bytes = 10) {
  uint64_t v = 0;
  for (int shift = 0; shift < 7 * max_bytes; shift += 7) {
    if (*pos >= in.size()) return false;
    const auto b = static_cast<uint8_t>(in[(*pos)++]);
    v |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) {
      *out = v;
      return true;
    }
  }
  return false;  // too long
}

}  // namespace

// One ChunkRecord's proto3 wire bytes, read in place (key and value are
// views into `body`): what ParseFromArray gives for every record a writer
// makes, with the last occurrence of a field winning and unknown fields (or
// known ones with another wire type) skipped. Groups are refused.
bool ParseChunkRecord(std::string_view body, std::string_view* key, uint64_t* revision,
                      std::string_view* value, int64_t* expires_ns) {
  *key = {};
  *revision = 0;
  *value = {};
  if (expires_ns != nullptr) *expires_ns = 0;
  size_t pos = 0;
  while (pos < body.size()) {
    uint64_t tag = 0;
    if (!ReadVarint(body, &pos, &tag, 5) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) {
      return false;
    }
    const uint64_t field = tag >> 3;
    switch (tag & 7) {
      case 0: {
        uint64_t v = 0;
        if (!ReadVarint(body, &pos, &v)) return false;
        if (field == 2) *revision = v;
        // int64 on the wire: a negative value reads as no deadline.
        if (field == 4 && expires_ns != nullptr) *expires_ns = static_cast<int64_t>(v);
        break;
      }
      case 2: {
        uint64_t len = 0;
        if (!ReadVarint(body, &pos, &len, 5) || len > 0x7fffffff || len > body.size() - pos) {
          return false;
        }
        const std::string_view bytes = body.substr(pos, len);
        pos += len;
        if (field == 1) *key = bytes;
        if (field == 3) *value = bytes;
        break;
      }
      case 1:
        if (body.size() - pos < 8) return false;
        pos += 8;
        break;
      case 5:
        if (body.size() - pos < 4) return false;
        pos += 4;
        break;
      default:
        return false;
    }
  }
  return true;
}

Status ForEachRecord(
    std::string_view raw, const std::string& what,
    const std::function<Status(std::string_view, uint64_t, std::string_view, int64_t)>& fn) {
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
    std::string_view key, value;
    uint64_t revision = 0;
    int64_t expires_ns = 0;
    if (!ParseChunkRecord(raw.substr(used, n), &key, &revision, &value, &expires_ns)) {
      return Status::Corruption(what + ": record " + std::to_string(index) + " does not decode");
    }
    KVFOLD_RETURN_IF_ERROR(fn(key, revision, value, std::max<int64_t>(expires_ns, 0)));
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
