#include "live/s3_server.h"

#include <httplib.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <vector>

#include "live/nats_server.h"  // FreePort, HttpGet

namespace kvfold::live {

std::string S3Server::Find(std::string* why) {
  const char* env = std::getenv("KVFOLD_S3RVER");
  if (env != nullptr && *env != '\0') {
    if (access(env, X_OK) == 0) return env;
    *why = std::string("KVFOLD_S3RVER=") + env + " is not executable";
    return "";
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path == nullptr ? "" : path;
  size_t at = 0;
  while (at <= dirs.size()) {
    const size_t colon = dirs.find(':', at);
    const std::string dir =
        dirs.substr(at, colon == std::string::npos ? std::string::npos : colon - at);
    const std::string candidate = dir + "/s3rver";
    if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  *why = "no s3rver: set KVFOLD_S3RVER to the launcher scripts/fetch-s3rver.sh prints";
  return "";
}

std::string S3Server::FindSigV4Verifier(std::string* why) {
  const char* env = std::getenv("KVFOLD_S3_SIGV4");
  if (env == nullptr || *env == '\0') {
    *why =
        "no SigV4 verifier: set KVFOLD_S3_SIGV4 to the launcher scripts/fetch-sigv4-verifier.sh "
        "prints";
    return "";
  }
  if (access(env, X_OK) == 0) return env;
  *why = std::string("KVFOLD_S3_SIGV4=") + env + " is not executable";
  return "";
}

namespace {

// Runs `argv` with its output in `log`; killed when this process dies.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    FILE* out = std::freopen(log.c_str(), "w", stdout);
    (void)out;
    dup2(fileno(stdout), fileno(stderr));
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

// Waits until `ready` (`pid` serves); aborts with its log when it exits or
// takes more than 30 s.
void AwaitServing(pid_t pid, const std::function<bool()>& ready, const std::string& what,
                  const std::string& log) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!ready()) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid || std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "S3Server: %s did not start; its log:\n%s\n", what.c_str(),
                   ReadWholeFile(log).c_str());
      std::abort();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void Stop(pid_t pid) {
  if (pid > 0) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
}

}  // namespace

S3Server::S3Server() {
  std::string why;
  const std::string bin = Find(&why);
  if (bin.empty()) {
    std::fprintf(stderr, "S3Server: %s\n", why.c_str());
    std::abort();
  }
  setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
  unsetenv("AWS_SESSION_TOKEN");
  port_ = FreePort();
  const std::string data = dir_.path() + "/data";
  std::filesystem::create_directories(data);
  const std::string log = dir_.path() + "/s3rver.log";
  pid_ = Spawn({bin, "-d", data, "-a", "127.0.0.1", "-p", std::to_string(port_), "--silent"}, log);
  AwaitServing(
      pid_, [this] { return HttpGet(port_, "/").first != 0; }, "s3rver", log);

  const std::string node = FindSigV4Verifier(&why);
  if (node.empty()) return;
  verifier_port_ = FreePort();
  const std::string verifier_log = dir_.path() + "/sigv4.log";
  verifier_pid_ = Spawn(
      {node, KVFOLD_SOURCE_DIR "/tests/live/s3_sigv4_proxy.js", std::to_string(verifier_port_),
       std::to_string(port_), options().region, "S3RVER", "S3RVER"},
      verifier_log);
  // Not probed by a request: it would log a refusal.
  AwaitServing(
      verifier_pid_,
      [&] {
        return ReadWholeFile(verifier_log).find("s3_sigv4_proxy: listening") != std::string::npos;
      },
      "the SigV4 verifier", verifier_log);
}

S3Server::~S3Server() {
  Stop(verifier_pid_);
  Stop(pid_);
}

std::string S3Server::refused_signatures() const {
  std::string refused;
  std::istringstream lines(ReadWholeFile(dir_.path() + "/sigv4.log"));
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" SignatureDoesNotMatch: ") != std::string::npos ||
        line.find(" XAmzContentSHA256Mismatch: ") != std::string::npos) {
      refused += line + "\n";
    }
  }
  return refused;
}

S3Options S3Server::options() const {
  S3Options o;
  o.endpoint = endpoint();
  o.region = "us-east-1";
  o.addressing = S3Options::Addressing::kPath;
  o.part_size = size_t{5} << 20;  // the smallest S3 takes: multipart is cheap to reach
  // s3rver ignores conditional writes (S3LiveTest.S3rverIgnoresConditionalWrites).
  o.allow_unconditional_pointer = true;
  return o;
}

S3FaultProxy::S3FaultProxy(int upstream_port)
    : server_(std::make_unique<httplib::Server>()), upstream_port_(upstream_port) {
  // A route per method (HEAD goes to Get's): bodies are read before a
  // route runs, not before a pre-routing handler.
  auto handle = [this](const httplib::Request& req, httplib::Response& res) {
    ++requests_;
    // The answer to give instead of the server's, chosen under the lock and
    // given outside it (a racer sends requests of its own meanwhile).
    Fault hit;
    {
      std::lock_guard lock(mu_);
      if (!expired_token_.empty() &&
          req.get_header_value("x-amz-security-token") == expired_token_) {
        ++expired_;
        hit.status = 400;
        hit.code = "ExpiredToken";
      } else if (fault_.left > 0 && (fault_.method.empty() || fault_.method == req.method) &&
                 req.target.find(fault_.target) != std::string::npos) {
        --fault_.left;
        hit = fault_;
      }
    }
    if (hit.status != 0 && !hit.forward_first) {
      if (hit.before) hit.before();
      Refuse(hit, res);
      return;
    }
    httplib::Client upstream("127.0.0.1", upstream_port_);
    httplib::Request forward;
    forward.method = req.method;
    forward.path = req.target;
    for (const auto& [name, value] : req.headers) {
      if (name == "Host" || name == "Content-Length" || name == "REMOTE_ADDR" ||
          name == "REMOTE_PORT" || name == "LOCAL_ADDR" || name == "LOCAL_PORT") {
        continue;
      }
      forward.headers.emplace(name, value);
    }
    forward.body = req.body;
    auto answer = upstream.send(forward);
    if (hit.status != 0) {
      Refuse(hit, res);
      return;
    }
    if (!answer) {
      res.status = 502;
      return;
    }
    res.status = answer->status;
    for (const auto& [name, value] : answer->headers) {
      if (name == "Content-Length" || name == "Transfer-Encoding" || name == "Connection") continue;
      res.set_header(name, value);
    }
    res.body = answer->body;
  };
  server_->Get(".*", handle);
  server_->Put(".*", handle);
  server_->Post(".*", handle);
  server_->Delete(".*", handle);
  port_ = server_->bind_to_any_port("127.0.0.1");
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

void S3FaultProxy::Refuse(const Fault& fault, httplib::Response& res) {
  res.status = fault.status;
  if (fault.code.empty()) return;  // a bare status
  res.set_content("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>" + fault.code +
                      "</Code><Message>injected by the test's proxy</Message></Error>",
                  "application/xml");
}

void S3FaultProxy::FailNext(int n, int status, const std::string& code, const std::string& method,
                            const std::string& target_part) {
  std::lock_guard lock(mu_);
  fault_ = Fault{n, status, code, method, target_part, {}, false};
}

void S3FaultProxy::LoseNextRace(const std::string& method, const std::string& target_part,
                                std::function<void()> racer) {
  std::lock_guard lock(mu_);
  fault_ = Fault{1, 412, "PreconditionFailed", method, target_part, std::move(racer), false};
}

void S3FaultProxy::StoreThenFailNext(int status, const std::string& code, const std::string& method,
                                     const std::string& target_part) {
  std::lock_guard lock(mu_);
  fault_ = Fault{1, status, code, method, target_part, {}, true};
}

S3FaultProxy::~S3FaultProxy() {
  server_->stop();
  thread_.join();
}

}  // namespace kvfold::live
