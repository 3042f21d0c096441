// How fold records and metadata are laid out as bytes. See docs/fold-format.md.

#ifndef KVFOLD_STORE_RECORD_CODEC_H_
#define KVFOLD_STORE_RECORD_CODEC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvfold/fold.h"
#include "kvfold/status.h"

namespace kvfold::store {

// Store keys: entries live under 'e' + key, metadata under 'm' + name, so a
// prefix scan over entries never meets metadata.
inline constexpr char kEntryTag = 'e';
inline constexpr char kMetaTag = 'm';

std::string EntryStoreKey(std::string_view key);
std::string MetaStoreKey(std::string_view name);

// Entry record: one flags byte (bit 0: tombstone, bit 1: a deadline
// follows), the revision as 8 bytes big-endian, with bit 1 the deadline
// (Entry::expires_ns) as 8 bytes big-endian, then the value bytes.
std::string EncodeEntry(const Entry& entry);
// The same into *out (its buffer reused across entries).
void EncodeEntryTo(const Entry& entry, std::string* out);
Status DecodeEntry(std::string_view bytes, Entry* out);
// Whether an entry record is a tombstone, from its header alone (a count
// needs no value); Corruption as DecodeEntry for a header it refuses.
Status DecodeTombstoneFlag(std::string_view bytes, bool* deleted);

std::string EncodeU64(uint64_t v);  // 8 bytes big-endian
Status DecodeU64(std::string_view bytes, uint64_t* out);

// A list of strings: each as 4-byte big-endian length + bytes.
std::string EncodeStringList(const std::vector<std::string>& list);
Status DecodeStringList(std::string_view bytes, std::vector<std::string>* out);

// Live-key and entry counters move by what replacing `before` with `after`
// changes. `before` is null when the key was never seen.
void CountReplacement(const Entry* before, const Entry& after, FoldMeta* meta);
// Applies a caller's FoldCommit::counts; Internal if a count would go
// below zero (the caller's view of the fold was wrong).
Status ApplyCountChange(const FoldCommit::CountChange& change, FoldMeta* meta);

}  // namespace kvfold::store

#endif  // KVFOLD_STORE_RECORD_CODEC_H_
