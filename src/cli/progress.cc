#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>

namespace kvfold::cli {

ProgressBar::ProgressBar(std::string label)
    : label_(std::move(label)),
      enabled_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {}

void ProgressBar::Finish() {
  if (drawn_) std::fputc('\n', stderr);
  drawn_ = false;
}

void ProgressBar::Update(const ArtifactProgress& p) {
  if (!enabled_) return;
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double mib = static_cast<double>(p.bytes_done) / (1 << 20);
  const double rate = secs > 0 ? mib / secs : 0;
  std::string eta = "?";
  if (p.entries_total > 0 && p.entries_done > 0 && p.entries_done <= p.entries_total) {
    const double left = secs * static_cast<double>(p.entries_total - p.entries_done) /
                        static_cast<double>(p.entries_done);
    eta = std::to_string(static_cast<long>(left + 0.5)) + "s";
  }
  std::fprintf(stderr, "\r%s: %llu/%llu entries, %.1f MiB, %.1f MiB/s, ETA %s   ", label_.c_str(),
               static_cast<unsigned long long>(p.entries_done),
               static_cast<unsigned long long>(p.entries_total), mib, rate, eta.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace kvfold::cli
