#include "store/info_log.h"

#include <rocksdb/env.h>
#include <sys/time.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <mutex>

namespace kvfold::store {
namespace {

namespace fs = std::filesystem;

constexpr uintmax_t kRotateBytes = 16u << 20;

class StdioLogger final : public rocksdb::Logger {
 public:
  explicit StdioLogger(std::FILE* file) : Logger(rocksdb::InfoLogLevel::INFO_LEVEL), file_(file) {}
  ~StdioLogger() override {
    if (file_ != nullptr) std::fclose(file_);
  }

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    if (file_ == nullptr) return;
    timeval now{};
    gettimeofday(&now, nullptr);
    tm t{};
    localtime_r(&now.tv_sec, &t);
    std::lock_guard lock(mu_);
    std::fprintf(file_, "%04d/%02d/%02d-%02d:%02d:%02d.%06ld ", t.tm_year + 1900, t.tm_mon + 1,
                 t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, static_cast<long>(now.tv_usec));
    std::vfprintf(file_, format, ap);
    std::fputc('\n', file_);
    std::fflush(file_);
    std::clearerr(file_);  // a full disk: this line is lost, the next may fit
  }
  void Flush() override {
    std::lock_guard lock(mu_);
    if (file_ != nullptr) std::fflush(file_);
  }

 private:
  std::mutex mu_;
  std::FILE* file_;
};

}  // namespace

std::shared_ptr<rocksdb::Logger> NewFoldInfoLog(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  const fs::path log = fs::path(dir) / "LOG";
  const uintmax_t size = fs::file_size(log, ec);
  if (!ec && size > kRotateBytes) fs::rename(log, fs::path(dir) / "LOG.old", ec);
  return std::make_shared<StdioLogger>(std::fopen(log.c_str(), "ae"));
}

}  // namespace kvfold::store
