// Keys and scopes.
//
// A key follows the NATS KV rules (ADR-6/ADR-8): one or more of
// [-/_=.a-zA-Z0-9], no leading or trailing '.', no empty token ("..").
// A scope is a set of key prefixes; "" alone is the whole bucket. Prefixes
// are byte prefixes ("user" covers "user1" and "users.x"), not subject tokens.
// Scope is an immutable value; const methods are safe from any thread.

#ifndef KVFOLD_SCOPE_H_
#define KVFOLD_SCOPE_H_

#include <string>
#include <string_view>
#include <vector>

#include "kvfold/status.h"

namespace kvfold {

// OK when `key` is a valid KV key; InvalidArgument naming the fault otherwise.
Status ValidateKey(std::string_view key);

// OK when `prefix` is a valid key prefix: "" or the characters of a key with
// no leading '.' and no "..". A trailing '.' is allowed.
Status ValidatePrefix(std::string_view prefix);

class Scope {
 public:
  // The whole bucket.
  Scope();

  // Validates each prefix and makes the set disjoint: a prefix covered by
  // another is dropped, the rest are sorted. An empty list is the whole
  // bucket. Returns InvalidArgument naming the first bad prefix.
  static StatusOr<Scope> Make(const std::vector<std::string>& prefixes);

  // The disjoint, sorted prefixes. Never empty: the whole bucket is {""}.
  const std::vector<std::string>& prefixes() const { return prefixes_; }

  bool IsWholeBucket() const { return prefixes_.size() == 1 && prefixes_[0].empty(); }

  // True when `key` starts with one of the prefixes.
  bool Contains(std::string_view key) const;

  // True when every key this scope contains, `other` contains too.
  bool CoveredBy(const Scope& other) const;

  // "[a., b.]" or "[<whole bucket>]", for messages.
  std::string ToString() const;

  friend bool operator==(const Scope& a, const Scope& b) { return a.prefixes_ == b.prefixes_; }

 private:
  explicit Scope(std::vector<std::string> prefixes) : prefixes_(std::move(prefixes)) {}

  std::vector<std::string> prefixes_;
};

}  // namespace kvfold

#endif  // KVFOLD_SCOPE_H_
