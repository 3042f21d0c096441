// kvfold mirror: watch a bucket into a fold until stopped or caught up.

#include <signal.h>

#include <atomic>
#include <ctime>
#include <iostream>
#include <stop_token>
#include <thread>

#include "cli/commands.h"
#include "kvfold/connection.h"
#include "kvfold/fold.h"
#include "kvfold/watcher.h"

namespace kvfold::cli {
namespace {

struct MirrorFlags {
  ConnectOptions connect;
  std::string bucket;
  std::string fold;
  std::vector<std::string> scope;
  bool until_caught_up = false;
  size_t batch = 1000;
  bool no_sync = false;
  bool verbose = false;
};

// Turns SIGINT and SIGTERM into a stop request. The signals are blocked in
// every thread (set before nats.c starts its threads) and taken by one
// thread with sigtimedwait, so no handler runs in an arbitrary thread.
class SignalStopper {
 public:
  SignalStopper() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    thread_ = std::thread([this] {
      const timespec tick{0, 100 * 1000 * 1000};
      while (!done_.load()) {
        if (sigtimedwait(&set_, nullptr, &tick) > 0) {
          source_.request_stop();
          return;
        }
      }
    });
  }
  ~SignalStopper() {
    done_.store(true);
    thread_.join();
  }
  std::stop_token token() const { return source_.get_token(); }

 private:
  sigset_t set_;
  std::stop_source source_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

int RunMirror(const MirrorFlags& f) {
  auto scope = Scope::Make(f.scope);
  if (!scope.ok()) return Report("mirror", scope.status());
  if (f.batch == 0) {
    return Report("mirror", Status::InvalidArgument("--batch must be > 0"));
  }
  if (f.connect.user.empty() != f.connect.password.empty()) {
    return Report("mirror", Status::InvalidArgument(
                                "--user and --password go together"));
  }
  SignalStopper stopper;
  auto source = OpenNatsBucket(f.connect, f.bucket);
  if (!source.ok()) return Report("mirror", source.status());
  FoldOptions fold_options;
  fold_options.sync = !f.no_sync;
  auto fold = OpenRocksFold(f.fold, fold_options);
  if (!fold.ok()) return Report("mirror", fold.status());

  WatchOptions options;
  options.scope = *scope;
  options.batch_size = f.batch;
  options.until_caught_up = f.until_caught_up;
  options.stop = stopper.token();
  options.log = [](std::string_view line) {
    std::cerr << "kvfold mirror: " << line << "\n";
  };
  if (f.verbose) {
    options.on_applied = [](uint64_t cursor) {
      std::cerr << "kvfold mirror: committed through " << cursor << "\n";
    };
  }
  Status s = Watch(**source, **fold, options);
  if (!s.ok()) return Report("mirror", s);
  auto meta = (*fold)->ReadMeta();
  if (!meta.ok()) return Report("mirror", meta.status());
  std::cerr << "kvfold mirror: bucket " << f.bucket << " folded through sequence "
            << (meta->cursor ? std::to_string(*meta->cursor) : "<none>")
            << ", " << meta->live_keys << " live keys in " << f.fold << "\n";
  return kExitOk;
}

}  // namespace

Runner AddMirrorCommand(CLI::App& app) {
  auto flags = std::make_shared<MirrorFlags>();
  CLI::App* cmd = app.add_subcommand(
      "mirror",
      "Mirror a KV bucket into a fold; runs until SIGINT/SIGTERM (then "
      "flushes and exits 0) or, with --until-caught-up, until the fold has "
      "reached the stream's last sequence as read at start. Exit codes: 0 ok, "
      "2 usage, 3 cursor expired, 1 other errors.");
  cmd->add_option("--server", flags->connect.url, "NATS server URL(s), comma separated")
      ->required();
  cmd->add_option("--bucket", flags->bucket, "KV bucket name")->required();
  cmd->add_option("--fold", flags->fold, "fold directory (created when missing)")
      ->required();
  cmd->add_option("--scope", flags->scope,
                  "key prefix to mirror; repeat for several (default: whole bucket)");
  cmd->add_flag("--until-caught-up", flags->until_caught_up,
                "exit 0 once the fold reached the stream's last sequence at start");
  cmd->add_option("--batch", flags->batch, "changes per commit (default 1000)");
  cmd->add_option("--creds", flags->connect.creds_file, "NATS credentials file")
      ->check(CLI::ExistingFile);
  cmd->add_option("--user", flags->connect.user, "user name");
  cmd->add_option("--password", flags->connect.password, "password");
  cmd->add_option("--token", flags->connect.token, "authentication token");
  cmd->add_option("--tls-ca", flags->connect.tls_ca_file, "CA bundle to trust")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-cert", flags->connect.tls_cert_file, "client certificate")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-key", flags->connect.tls_key_file, "client key")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--no-sync", flags->no_sync,
                "do not fsync each commit (faster; a machine crash may lose "
                "the newest commits, never tear one)");
  cmd->add_flag("-v,--verbose", flags->verbose, "print every commit");
  return [flags] { return RunMirror(*flags); };
}

}  // namespace kvfold::cli
