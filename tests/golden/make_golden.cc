// Writes the golden artifacts into the directory given (see
// artifacts/FORMAT.md, "Golden artifacts"):
//   build/tests/kvfold_make_golden artifacts/golden/v1-digest
#include <cstdio>

#include "golden/golden_fold.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kvfold_make_golden DIR\n");
    return 2;
  }
  auto fold = kvfold::NewMemoryFold();
  kvfold::Status s = fold->Commit(kvfold::golden::V1Fold());
  auto to = kvfold::OpenTransport(std::string("dir:") + argv[1], kvfold::ConnectOptions{},
                                  kvfold::TransportOptions{.create_if_missing = true, .s3 = {}});
  if (!s.ok() || !to.ok()) return 1;
  auto m = kvfold::ExportArtifact(*fold, **to, kvfold::golden::V1Options());
  if (!m.ok()) {
    std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
    return 1;
  }
  std::printf("wrote %s (%zu chunks) to %s\n", m->artifact_id.c_str(), m->chunks.size(), argv[1]);
  return 0;
}
