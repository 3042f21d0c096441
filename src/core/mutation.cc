#include "core/mutation.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kvfold::core {
namespace {

// Every mutation point in the code base; scripts/mutations.sh runs each.
constexpr const char* kKnown[] = {
    "window-skip-before-open",    // watcher: no window check before the consumer
    "window-skip-after-open",     // watcher: no window check after the consumer
    "window-ignore-identity",     // window: a recreated stream passes
    "window-ignore-first-seq",    // window: evicted history passes
    "batch-drop-on-failure",      // watcher: a failed commit loses its batch
    "probe-ignore-drain",         // watcher: cursor jumps without proof of drain
    "fold-cursor-backward",       // stores: the cursor may move backward
    "fold-message-ignore-revision",  // core: an older message overwrites a newer entry
    "seed-skip-verify-pass",      // seed: writes before the whole artifact verified
    "seed-cursor-every-commit",   // seed: cursor set before the final commit
    "pointer-any-direction",      // pointer rule: the pointer may move backward
    "manifest-skip-checksum",     // manifest frame: checksum not checked
    "chunk-skip-sha256",          // chunk reader: SHA-256 not checked
};

const char* Active() {
  static const char* active = [] {
    const char* v = std::getenv("KVFOLD_MUTATION");
    if (v == nullptr || *v == '\0') return static_cast<const char*>(nullptr);
    for (const char* k : kKnown) {
      if (std::strcmp(k, v) == 0) return k;
    }
    std::fprintf(stderr, "KVFOLD_MUTATION=%s names no mutation point\n", v);
    std::abort();
  }();
  return active;
}

}  // namespace

bool MutationActive(const char* name) {
  const char* active = Active();
  return active != nullptr && std::strcmp(active, name) == 0;
}

}  // namespace kvfold::core
