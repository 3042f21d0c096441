#include "cli/logger.h"

#include <sys/time.h>

#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>

namespace kvfold::cli {
namespace {

std::string UtcNowMillis() {
  timeval tv{};
  gettimeofday(&tv, nullptr);
  std::tm tm{};
  gmtime_r(&tv.tv_sec, &tm);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(tv.tv_usec / 1000));
  return buf;
}

}  // namespace

void Logger::Configure(const LogFlags& flags) {
  std::lock_guard lock(mu_);
  threshold_ = flags.quiet     ? LogLevel::kWarning
               : flags.verbose ? LogLevel::kDebug
                               : LogLevel::kInfo;
  format_ = flags.format == "json" ? LogFormat::kJson : LogFormat::kText;
}

void Logger::Log(LogLevel level, std::string_view text) {
  std::lock_guard lock(mu_);
  if (level < threshold_) return;
  if (format_ == LogFormat::kJson) {
    nlohmann::ordered_json line = {{"time", UtcNowMillis()},
                                   {"level", LogLevelName(level)},
                                   {"command", command_},
                                   {"msg", text}};
    // A message is ours, but a server's error text inside it may hold
    // anything: never let one line break the stream.
    std::cerr << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return;
  }
  std::cerr << "kvfold " << command_ << ": ";
  if (level >= LogLevel::kWarning)
    std::cerr << (level == LogLevel::kError ? "ERROR: " : "WARNING: ");
  std::cerr << text << "\n";
}

Logger& Log() {
  static Logger logger;
  return logger;
}

void AddLogFlags(CLI::App* cmd, LogFlags* flags) {
  auto* v =
      cmd->add_flag("-v,--verbose", flags->verbose, "log routine progress too (every commit)");
  cmd->add_flag("-q,--quiet", flags->quiet, "log only warnings and errors")->excludes(v);
  cmd->add_option("--log-format", flags->format, "text (default) or json (one object per line)")
      ->check(CLI::IsMember({"text", "json"}));
}

}  // namespace kvfold::cli
