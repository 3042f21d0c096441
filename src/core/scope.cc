#include "kvfold/scope.h"

#include <algorithm>

namespace kvfold {
namespace {

bool IsKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '/' || c == '_' || c == '=' || c == '.';
}

// Checks the rules keys and prefixes share; `what` names the input.
Status CheckChars(std::string_view s, std::string_view what) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (!IsKeyChar(s[i])) {
      return Status::InvalidArgument(std::string(what) + " \"" + std::string(s) +
                                     "\" has character '" + std::string(1, s[i]) + "' at offset " +
                                     std::to_string(i) + "; allowed are [-/_=.a-zA-Z0-9]");
    }
  }
  if (!s.empty() && s.front() == '.') {
    return Status::InvalidArgument(std::string(what) + " \"" + std::string(s) +
                                   "\" starts with '.'");
  }
  if (s.find("..") != std::string_view::npos) {
    return Status::InvalidArgument(std::string(what) + " \"" + std::string(s) +
                                   "\" has an empty token (\"..\")");
  }
  return Status::OK();
}

}  // namespace

Status ValidateKey(std::string_view key) {
  if (key.empty()) return Status::InvalidArgument("key is empty");
  KVFOLD_RETURN_IF_ERROR(CheckChars(key, "key"));
  if (key.back() == '.') {
    return Status::InvalidArgument("key \"" + std::string(key) + "\" ends with '.'");
  }
  return Status::OK();
}

Status ValidatePrefix(std::string_view prefix) { return CheckChars(prefix, "scope prefix"); }

Scope::Scope() : prefixes_{""} {}

StatusOr<Scope> Scope::Make(const std::vector<std::string>& prefixes) {
  if (prefixes.empty()) return Scope();
  std::vector<std::string> sorted = prefixes;
  for (const auto& p : sorted) KVFOLD_RETURN_IF_ERROR(ValidatePrefix(p));
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  // In sorted order a prefix comes right before the strings it covers, so
  // keeping only prefixes not covered by the last kept one makes the set
  // disjoint.
  std::vector<std::string> disjoint;
  for (auto& p : sorted) {
    if (!disjoint.empty() && p.starts_with(disjoint.back())) continue;
    disjoint.push_back(std::move(p));
  }
  return Scope(std::move(disjoint));
}

bool Scope::Contains(std::string_view key) const {
  for (const auto& p : prefixes_) {
    if (key.starts_with(p)) return true;
  }
  return false;
}

bool Scope::CoveredBy(const Scope& other) const {
  for (const auto& p : prefixes_) {
    if (!other.Contains(p)) return false;
  }
  return true;
}

std::string Scope::ToString() const {
  if (IsWholeBucket()) return "[<whole bucket>]";
  std::string out = "[";
  for (size_t i = 0; i < prefixes_.size(); ++i) {
    if (i) out += ", ";
    out += prefixes_[i];
  }
  return out + "]";
}

}  // namespace kvfold
