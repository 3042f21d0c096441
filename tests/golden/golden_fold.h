// The fixed fold and export options behind the golden artifacts in
// artifacts/golden/. Shared by the generator (make_golden.cc) and the test
// (golden_test.cc): change either and the golden test fails.

#ifndef KVFOLD_TESTS_GOLDEN_GOLDEN_FOLD_H_
#define KVFOLD_TESTS_GOLDEN_GOLDEN_FOLD_H_

#include <string>

#include "kvfold/artifact.h"
#include "kvfold/fold.h"

namespace kvfold::golden {

inline constexpr const char* kV1Id = "00000000000000000042-golden0v1";

// 40 keys over two prefixes, a few tombstones (not exported), binary values.
inline FoldCommit V1Fold() {
  FoldCommit c;
  for (int i = 0; i < 40; ++i) {
    const std::string key = std::string(i % 2 ? "b." : "a.") + "key" + std::to_string(100 + i);
    std::string value = "value-" + std::to_string(i * i);
    if (i % 5 == 0) value += std::string("\0\x01\xff", 3);
    c.entries[key] = Entry{static_cast<uint64_t>(i + 1), i % 9 == 8, i % 9 == 8 ? "" : value};
  }
  c.cursor = 42;
  c.bucket = "golden";
  c.scope = std::vector<std::string>{"a.", "b."};
  c.stream_created = "2026-01-01T00:00:00.000000000Z";
  return c;
}

inline ExportOptions V1Options() {
  ExportOptions o;
  o.exporter_id = "kvfold-golden";
  o.chunk_raw_bytes = 512;  // several chunks
  o.fixed_artifact_id = kV1Id;
  o.fixed_created_unix_ms = 1767225600000;  // 2026-01-01T00:00:00Z
  return o;
}

}  // namespace kvfold::golden

#endif  // KVFOLD_TESTS_GOLDEN_GOLDEN_FOLD_H_
