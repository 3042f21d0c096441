#include "kvfold/status.h"

namespace kvfold {

std::string_view Status::CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "OK";
    case Code::kNotFound:
      return "NotFound";
    case Code::kInvalidArgument:
      return "InvalidArgument";
    case Code::kFailedPrecondition:
      return "FailedPrecondition";
    case Code::kCorruption:
      return "Corruption";
    case Code::kIOError:
      return "IOError";
    case Code::kUnavailable:
      return "Unavailable";
    case Code::kCursorExpired:
      return "CursorExpired";
    case Code::kCancelled:
      return "Cancelled";
    case Code::kAlreadyExists:
      return "AlreadyExists";
    case Code::kInternal:
      return "Internal";
    case Code::kPermissionDenied:
      return "PermissionDenied";
    case Code::kDeadlineExceeded:
      return "DeadlineExceeded";
  }
  return "Unknown";
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string msg(context);
  msg += ": ";
  msg += message_;
  return Status(code_, msg);
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(CodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

}  // namespace kvfold
