// What tests compare folds by: the live entries, and a full printable
// picture (tombstones and metadata included) to prove a fold untouched.

#ifndef KVFOLD_TESTS_FOLD_VIEW_H_
#define KVFOLD_TESTS_FOLD_VIEW_H_

#include <map>
#include <string>

#include "kvfold/fold.h"

namespace kvfold {

inline std::map<std::string, Entry> LiveEntries(Fold& fold) {
  std::map<std::string, Entry> out;
  Status s = fold.Scan("", false, [&](std::string_view k, const Entry& e) {
    out.emplace(std::string(k), e);
    return true;
  });
  if (!s.ok()) out.emplace("<scan failed>", Entry{0, true, s.ToString()});
  return out;
}

inline std::string Picture(Fold& fold) {
  std::string out;
  fold.Scan("", true, [&](std::string_view k, const Entry& e) {
    out +=
        std::string(k) + "@" + std::to_string(e.revision) + (e.deleted ? "D" : "=") + e.value + ";";
    return true;
  });
  auto m = fold.ReadMeta();
  if (!m.ok()) return out + " meta: " + m.status().ToString();
  return out + " cursor=" + (m->cursor ? std::to_string(*m->cursor) : "none") +
         " bucket=" + m->bucket + " created=" + m->stream_created + " seeding=" + m->seeding;
}

}  // namespace kvfold

#endif  // KVFOLD_TESTS_FOLD_VIEW_H_
