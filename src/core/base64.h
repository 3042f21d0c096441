// Base64 (RFC 4648), standard and URL-safe alphabets, with padding.

#ifndef KVFOLD_CORE_BASE64_H_
#define KVFOLD_CORE_BASE64_H_

#include <optional>
#include <string>
#include <string_view>

namespace kvfold::core {

std::string Base64Encode(std::string_view bytes);
std::string Base64UrlEncode(std::string_view bytes);
// Either alphabet; nullopt for anything that is not base64.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace kvfold::core

#endif  // KVFOLD_CORE_BASE64_H_
