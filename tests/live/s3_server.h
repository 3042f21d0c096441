// A real S3-protocol server for the S3 transport's live tests: s3rver (from
// the npm registry, installed by scripts/fetch-s3rver.sh) on a free
// loopback port, storing in a temporary directory; stopped and removed when
// the object dies. Found through $KVFOLD_S3RVER, else `s3rver` on PATH.
//
// What s3rver lacks, stated where tests meet it: it accepts conditional
// writes (If-Match, If-None-Match) and ignores them, and it checks the
// access key id but not the signature.
//
// Also a fault proxy in front of it: answers 503 SlowDown to the next N
// requests (S3's throttling), forwarding the rest untouched.

#ifndef KVFOLD_TESTS_LIVE_S3_SERVER_H_
#define KVFOLD_TESTS_LIVE_S3_SERVER_H_

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "kvfold/transport.h"
#include "test_dir.h"

namespace httplib {
class Server;
}

namespace kvfold::live {

class S3Server {
 public:
  // The launcher to run, or "" with *why set when there is none.
  static std::string Find(std::string* why);

  // Starts it (REQUIRES: Find found one) and sets the AWS credential
  // variables to s3rver's (S3RVER / S3RVER) for this process.
  S3Server();
  ~S3Server();
  S3Server(const S3Server&) = delete;
  S3Server& operator=(const S3Server&) = delete;

  int port() const { return port_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // S3Options reaching this server, path-style.
  S3Options options() const;

 private:
  TestDir dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

class S3FaultProxy {
 public:
  explicit S3FaultProxy(int upstream_port);
  ~S3FaultProxy();

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // The next `n` requests are answered 503 SlowDown.
  void ThrottleNext(int n) { throttle_ = n; }
  int requests() const { return requests_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  int upstream_port_;
  int port_ = 0;
  std::atomic<int> throttle_{0};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

}  // namespace kvfold::live

#endif  // KVFOLD_TESTS_LIVE_S3_SERVER_H_
