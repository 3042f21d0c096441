#include "store/record_codec.h"

#include <cstdint>

#include "core/count_change.h"

namespace kvfold::store {
namespace {

void AppendU64(std::string* out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) {
    out->push_back(static_cast<char>((v >> shift) & 0xff));
  }
}

uint64_t ReadU64(std::string_view b) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(b[i]);
  return v;
}

}  // namespace

std::string EntryStoreKey(std::string_view key) {
  std::string out(1, kEntryTag);
  out.append(key);
  return out;
}

std::string MetaStoreKey(std::string_view name) {
  std::string out(1, kMetaTag);
  out.append(name);
  return out;
}

std::string EncodeEntry(const Entry& entry) {
  std::string out;
  EncodeEntryTo(entry, &out);
  return out;
}

void EncodeEntryTo(const Entry& entry, std::string* out) {
  const bool deadline = !entry.deleted && entry.expires_ns > 0;
  out->clear();
  out->reserve(17 + entry.value.size());
  out->push_back(static_cast<char>((entry.deleted ? 1 : 0) | (deadline ? 2 : 0)));
  AppendU64(out, entry.revision);
  if (deadline) AppendU64(out, static_cast<uint64_t>(entry.expires_ns));
  if (!entry.deleted) out->append(entry.value);
}

Status DecodeTombstoneFlag(std::string_view bytes, bool* deleted) {
  const auto flags = bytes.empty() ? 0 : static_cast<uint8_t>(bytes[0]);
  if (bytes.size() < 9 || flags > 1 || ((flags & 1) != 0 && bytes.size() != 9)) {
    Entry full;  // a deadline's checks, or what is wrong named
    KVFOLD_RETURN_IF_ERROR(DecodeEntry(bytes, &full));
  }
  *deleted = (flags & 1) != 0;
  return Status::OK();
}

Status DecodeEntry(std::string_view bytes, Entry* out) {
  if (bytes.size() < 9) {
    return Status::Corruption("fold entry record is " + std::to_string(bytes.size()) +
                              " bytes, shorter than its 9-byte header");
  }
  const auto flags = static_cast<uint8_t>(bytes[0]);
  if (flags > 2) {
    return Status::Corruption("fold entry record has unknown flags " + std::to_string(flags));
  }
  out->deleted = (flags & 1) != 0;
  out->revision = ReadU64(bytes.substr(1, 8));
  if (out->deleted && bytes.size() != 9) {
    return Status::Corruption("fold tombstone record carries a value");
  }
  size_t value_at = 9;
  out->expires_ns = 0;
  if ((flags & 2) != 0) {
    const uint64_t deadline = bytes.size() >= 17 ? ReadU64(bytes.substr(9, 8)) : 0;
    if (deadline == 0 || deadline > static_cast<uint64_t>(INT64_MAX)) {
      return Status::Corruption("fold entry record has a cut or invalid deadline");
    }
    out->expires_ns = static_cast<int64_t>(deadline);
    value_at = 17;
  }
  out->value.assign(bytes.substr(value_at));
  return Status::OK();
}

std::string EncodeU64(uint64_t v) {
  std::string out;
  AppendU64(&out, v);
  return out;
}

Status DecodeU64(std::string_view bytes, uint64_t* out) {
  if (bytes.size() != 8) {
    return Status::Corruption("fold metadata number is " + std::to_string(bytes.size()) +
                              " bytes, expected 8");
  }
  *out = ReadU64(bytes);
  return Status::OK();
}

std::string EncodeStringList(const std::vector<std::string>& list) {
  std::string out;
  for (const auto& s : list) {
    const auto n = static_cast<uint32_t>(s.size());
    for (int shift = 24; shift >= 0; shift -= 8) {
      out.push_back(static_cast<char>((n >> shift) & 0xff));
    }
    out.append(s);
  }
  return out;
}

Status DecodeStringList(std::string_view bytes, std::vector<std::string>* out) {
  out->clear();
  while (!bytes.empty()) {
    if (bytes.size() < 4) {
      return Status::Corruption("fold metadata list ends inside a length");
    }
    uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
    bytes.remove_prefix(4);
    if (bytes.size() < n) {
      return Status::Corruption("fold metadata list ends inside an item");
    }
    out->emplace_back(bytes.substr(0, n));
    bytes.remove_prefix(n);
  }
  return Status::OK();
}

void CountReplacement(const Entry* before, const Entry& after, FoldMeta* meta) {
  const FoldCommit::CountChange change = core::CountChangeOf(before, after);
  meta->live_keys += static_cast<uint64_t>(change.live_keys);  // wraps back for -1
  meta->entries += static_cast<uint64_t>(change.entries);
}

Status ApplyCountChange(const FoldCommit::CountChange& change, FoldMeta* meta) {
  const auto live = static_cast<int64_t>(meta->live_keys) + change.live_keys;
  const auto entries = static_cast<int64_t>(meta->entries) + change.entries;
  if (live < 0 || entries < 0 || live > entries) {
    return Status::Internal("a commit's count change (" + std::to_string(change.live_keys) +
                            " live, " + std::to_string(change.entries) +
                            " entries) does not fit the fold's counts");
  }
  meta->live_keys = static_cast<uint64_t>(live);
  meta->entries = static_cast<uint64_t>(entries);
  return Status::OK();
}

}  // namespace kvfold::store
