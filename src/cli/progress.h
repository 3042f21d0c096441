// A one-line progress display on stderr (entries, bytes, rate, ETA), shown
// only when stderr is a terminal.

#ifndef KVFOLD_CLI_PROGRESS_H_
#define KVFOLD_CLI_PROGRESS_H_

#include <chrono>
#include <string>

#include "kvfold/artifact.h"

namespace kvfold::cli {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label);
  ~ProgressBar() { Finish(); }
  void Update(const ArtifactProgress& p);
  // Ends the progress line so later output starts on a fresh one.
  void Finish();
  ArtifactProgressFn Callback() {
    return [this](const ArtifactProgress& p) { Update(p); };
  }

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace kvfold::cli

#endif  // KVFOLD_CLI_PROGRESS_H_
