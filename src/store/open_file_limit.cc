// RaiseOpenFileLimit (kvfold/fold.h).

#include <sys/resource.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "kvfold/fold.h"

namespace kvfold {
namespace {

uint64_t LimitValue(rlim_t limit) {
  return limit == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(limit);
}

std::string LimitText(rlim_t limit) {
  return limit == RLIM_INFINITY ? "unlimited" : std::to_string(limit);
}

}  // namespace

StatusOr<uint64_t> RaiseOpenFileLimit() {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0) {
    return Status::IOError(std::string("reading the open-file limit (RLIMIT_NOFILE): ") +
                           std::strerror(errno));
  }
  if (files.rlim_cur == files.rlim_max) return LimitValue(files.rlim_cur);
  const rlim_t from = files.rlim_cur;
  files.rlim_cur = files.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &files) != 0) {
    return Status::IOError("raising the open-file limit (RLIMIT_NOFILE) from " + LimitText(from) +
                           " to the hard limit " + LimitText(files.rlim_max) + ": " +
                           std::strerror(errno) +
                           "; a large fold may fail to open its table files: raise the limit "
                           "before starting (ulimit -n, or LimitNOFILE= in a systemd unit)");
  }
  return LimitValue(files.rlim_cur);
}

}  // namespace kvfold
