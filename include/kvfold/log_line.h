// One line of the watcher's log: what happened, in words, and how much it
// matters. It converts to std::string_view, so a log hook written as
// [](std::string_view line) { ... } keeps working; one that takes
// `const LogLine&` also sees the level.

#ifndef KVFOLD_LOG_LINE_H_
#define KVFOLD_LOG_LINE_H_

#include <ostream>
#include <string>
#include <string_view>

namespace kvfold {

enum class LogLevel {
  kDebug,    // routine progress (a commit)
  kInfo,     // a notable event that needs nothing done: a delivery reset, a
             // reconnect, a repair's decision and its outcome
  kWarning,  // a fault being retried (a failed commit), or a choice that
             // may cost correctness (repair none)
  kError,    // what ends the watch
};
std::string_view LogLevelName(LogLevel level);  // "debug", "info", "warning", "error"

struct LogLine {
  LogLine(std::string_view t) : text(t) {}    // NOLINT: an info line
  LogLine(const char* t) : text(t) {}         // NOLINT
  LogLine(const std::string& t) : text(t) {}  // NOLINT
  LogLine(LogLevel l, std::string_view t) : level(l), text(t) {}
  operator std::string_view() const { return text; }  // NOLINT: the point

  LogLevel level = LogLevel::kInfo;
  std::string_view text;  // valid only during the log hook's call
};

inline std::ostream& operator<<(std::ostream& os, const LogLine& line) { return os << line.text; }

}  // namespace kvfold

#endif  // KVFOLD_LOG_LINE_H_
