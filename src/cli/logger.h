// The CLI's log on stderr: one line per event, at or above a level
// (-q: warnings and errors; default: info; -v: also debug), as text
// ("kvfold mirror: ...") or as JSON lines (--log-format json) for a log
// pipeline: {"time":..., "level":..., "command":..., "msg":...}.
// Thread-safe: the watch and the export thread log through the same one.

#ifndef KVFOLD_CLI_LOGGER_H_
#define KVFOLD_CLI_LOGGER_H_

#include <CLI/CLI.hpp>
#include <mutex>
#include <string>
#include <string_view>

#include "kvfold/log_line.h"

namespace kvfold::cli {

enum class LogFormat { kText, kJson };

struct LogFlags {
  bool verbose = false;
  bool quiet = false;
  std::string format = "text";
};

class Logger {
 public:
  void Configure(const LogFlags& flags);
  void set_command(std::string command) {
    std::lock_guard lock(mu_);
    command_ = std::move(command);
  }
  bool Enabled(LogLevel level) const { return level >= threshold_; }
  void Log(LogLevel level, std::string_view text);
  void Info(std::string_view text) { Log(LogLevel::kInfo, text); }
  void Warn(std::string_view text) { Log(LogLevel::kWarning, text); }
  void Error(std::string_view text) { Log(LogLevel::kError, text); }

 private:
  std::mutex mu_;
  LogLevel threshold_ = LogLevel::kInfo;
  LogFormat format_ = LogFormat::kText;
  std::string command_ = "kvfold";
};

// The process's one logger.
Logger& Log();

// Adds -v, -q and --log-format to `cmd`.
void AddLogFlags(CLI::App* cmd, LogFlags* flags);

}  // namespace kvfold::cli

#endif  // KVFOLD_CLI_LOGGER_H_
