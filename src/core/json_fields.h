// Typed reads of JSON fields that never throw. nlohmann's value() and get()
// throw type_error when a field holds another type, and the JSON we read
// (the latest pointer, object-store meta, leases, JetStream replies) is
// written by other processes: a wrong type must become a Status, never an
// exception through the API.

#ifndef KVFOLD_CORE_JSON_FIELDS_H_
#define KVFOLD_CORE_JSON_FIELDS_H_

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>

namespace kvfold::core {

// True when `v` holds a T: a string, a bool, a non-negative integer that
// fits (uint64_t) or an integer that fits (int64_t). Floats never count.
template <typename T>
bool HoldsJson(const nlohmann::json& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    return v.is_string();
  } else if constexpr (std::is_same_v<T, bool>) {
    return v.is_boolean();
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    return v.is_number_unsigned();
  } else {
    static_assert(std::is_same_v<T, int64_t>, "string, bool, uint64_t or int64_t");
    if (v.is_number_unsigned()) {
      return v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    }
    return v.is_number_integer();
  }
}

// Reads field `key` of the object `j` into *out. Returns true when the
// field holds a T, or when it is absent or null and not `required` (*out is
// then left as it was); false when `j` is not an object, the field has
// another type, or it is required and missing.
template <typename T>
bool ReadJsonField(const nlohmann::json& j, const char* key, T* out, bool required = false) {
  if (!j.is_object()) return false;
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return !required;
  if (!HoldsJson<T>(*it)) return false;
  *out = it->template get<T>();
  return true;
}

}  // namespace kvfold::core

#endif  // KVFOLD_CORE_JSON_FIELDS_H_
