// Status and StatusOr: how every fallible kvfold call reports its outcome.
//
// No exception crosses the kvfold API. A Status is either OK or carries a
// code and a message that names the thing that failed and, where there is
// one, the fix. Status and StatusOr are values: copy and move them freely.
// They are not synchronized; do not share one object between threads while
// one of them mutates it.

#ifndef KVFOLD_STATUS_H_
#define KVFOLD_STATUS_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace kvfold {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kNotFound,
    kInvalidArgument,     // bad input from the caller: flags, keys, scope
    kFailedPrecondition,  // the fold or bucket is not in a state that allows this
    kCorruption,          // stored or received bytes do not decode
    kIOError,             // the local store failed
    kUnavailable,         // the server could not be reached or did not answer
    kCursorExpired,       // retention evicted history this fold needs
    kCancelled,           // a stop was requested
    kAlreadyExists,       // the work is already done (e.g. a newer artifact is the latest)
    kInternal,
    kPermissionDenied,  // the server refused a subject the credentials lack a right to
    kDeadlineExceeded,  // a wait ran out of time (the awaited state may still come)
  };

  Status() = default;  // OK

  static Status OK() { return Status(); }
  static Status NotFound(std::string_view msg) { return {Code::kNotFound, msg}; }
  static Status InvalidArgument(std::string_view msg) { return {Code::kInvalidArgument, msg}; }
  static Status FailedPrecondition(std::string_view msg) {
    return {Code::kFailedPrecondition, msg};
  }
  static Status Corruption(std::string_view msg) { return {Code::kCorruption, msg}; }
  static Status IOError(std::string_view msg) { return {Code::kIOError, msg}; }
  static Status Unavailable(std::string_view msg) { return {Code::kUnavailable, msg}; }
  static Status CursorExpired(std::string_view msg) { return {Code::kCursorExpired, msg}; }
  static Status Cancelled(std::string_view msg) { return {Code::kCancelled, msg}; }
  static Status AlreadyExists(std::string_view msg) { return {Code::kAlreadyExists, msg}; }
  static Status Internal(std::string_view msg) { return {Code::kInternal, msg}; }
  static Status PermissionDenied(std::string_view msg) { return {Code::kPermissionDenied, msg}; }
  static Status DeadlineExceeded(std::string_view msg) { return {Code::kDeadlineExceeded, msg}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  bool IsNotFound() const { return code_ == Code::kNotFound; }
  bool IsInvalidArgument() const { return code_ == Code::kInvalidArgument; }
  bool IsFailedPrecondition() const { return code_ == Code::kFailedPrecondition; }
  bool IsCorruption() const { return code_ == Code::kCorruption; }
  bool IsIOError() const { return code_ == Code::kIOError; }
  bool IsUnavailable() const { return code_ == Code::kUnavailable; }
  bool IsCursorExpired() const { return code_ == Code::kCursorExpired; }
  bool IsCancelled() const { return code_ == Code::kCancelled; }
  bool IsAlreadyExists() const { return code_ == Code::kAlreadyExists; }
  bool IsPermissionDenied() const { return code_ == Code::kPermissionDenied; }
  bool IsDeadlineExceeded() const { return code_ == Code::kDeadlineExceeded; }

  // Returns a copy whose message is "<context>: <message>". OK stays OK.
  Status WithContext(std::string_view context) const;

  // "OK" or "<CodeName>: <message>".
  std::string ToString() const;

  static std::string_view CodeName(Code code);

 private:
  Status(Code code, std::string_view msg) : code_(code), message_(msg) {}

  Code code_ = Code::kOk;
  std::string message_;
};

// A value or the Status that explains why there is none.
template <typename T>
class StatusOr {
 public:
  // REQUIRES: !status.ok()
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = Status::Internal("StatusOr built from OK");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok()
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace kvfold

// Propagates a non-OK Status to the caller.
#define KVFOLD_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::kvfold::Status kvfold_status_ = (expr);        \
    if (!kvfold_status_.ok()) return kvfold_status_; \
  } while (0)

#endif  // KVFOLD_STATUS_H_
