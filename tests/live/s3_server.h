// A real S3-protocol server for the S3 transport's live tests: s3rver (from
// the npm registry, installed by scripts/fetch-s3rver.sh) on a free
// loopback port, storing in a temporary directory; stopped and removed when
// the object dies. Found through $KVFOLD_S3RVER, else `s3rver` on PATH.
//
// What s3rver lacks, stated where tests meet it: it accepts conditional
// writes (If-Match, If-None-Match) and ignores them, and it checks the
// access key id but not the signature. For the signature, a verifying proxy
// (tests/live/s3_sigv4_proxy.js: every request signed again by the AWS
// SDK for JavaScript's signer, refused when it differs) stands in front of
// it when $KVFOLD_S3_SIGV4 names the launcher
// scripts/fetch-sigv4-verifier.sh prints.
//
// Also a fault proxy in front of it: answers the next N requests (or the
// next N of one method whose path or query holds a string) with an error of
// S3's or a bare status, loses a conditional write's race to another
// writer, and refuses a session token as expired, forwarding the rest
// untouched.

#ifndef KVFOLD_TESTS_LIVE_S3_SERVER_H_
#define KVFOLD_TESTS_LIVE_S3_SERVER_H_

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "kvfold/transport.h"
#include "test_dir.h"

namespace httplib {
class Server;
struct Response;
}  // namespace httplib

namespace kvfold::live {

class S3Server {
 public:
  // The launcher to run, or "" with *why set when there is none.
  static std::string Find(std::string* why);

  // The launcher of node with the AWS SDK's SigV4 signer on its module
  // path ($KVFOLD_S3_SIGV4), or "" with *why set when there is none.
  static std::string FindSigV4Verifier(std::string* why);

  // Starts it (REQUIRES: Find found one), and the verifying proxy in front
  // of it when FindSigV4Verifier finds one, and sets the AWS credential
  // variables to s3rver's (S3RVER / S3RVER) for this process.
  S3Server();
  ~S3Server();
  S3Server(const S3Server&) = delete;
  S3Server& operator=(const S3Server&) = delete;

  // s3rver's own port, which a fault proxy forwards to: a proxy between
  // the client and the verifier would change the Host header it signed.
  int port() const { return port_; }
  // Where clients reach it: through the verifying proxy when it runs.
  std::string endpoint() const {
    return "http://127.0.0.1:" + std::to_string(verifier_port_ > 0 ? verifier_port_ : port_);
  }
  // S3Options reaching endpoint(), path-style.
  S3Options options() const;
  // Whether requests to endpoint() have their signatures checked.
  bool verifies_signatures() const { return verifier_pid_ > 0; }
  // The verifying proxy's refusals so far, one a line ("" when none).
  std::string refused_signatures() const;

 private:
  TestDir dir_;
  int port_ = 0;
  pid_t pid_ = -1;
  int verifier_port_ = 0;
  pid_t verifier_pid_ = -1;
};

class S3FaultProxy {
 public:
  explicit S3FaultProxy(int upstream_port);
  ~S3FaultProxy();

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // The next `n` requests are answered 503 SlowDown (S3's throttling).
  void ThrottleNext(int n) { FailNext(n, 503, "SlowDown"); }
  // The next `n` requests of `method` ("" for any; HEAD is "HEAD") whose
  // target (path and query) contains `target_part` ("" for any) are
  // answered `status` with error `code`, in S3's XML error body (also under
  // a 200, as S3 may answer a multipart completion that failed). Code ""
  // answers the bare status with an empty body, as a proxy or a wrong
  // endpoint does, never S3 itself. Replaces any fault still pending.
  void FailNext(int n, int status, const std::string& code, const std::string& method = "",
                const std::string& target_part = "");
  // The next request of `method` whose target contains `target_part` is
  // answered 412 PreconditionFailed once `racer` has run (on the proxy's
  // thread, while that request waits): another writer's, which wins the
  // race the request's condition guards. s3rver ignores conditions, so
  // this is how a lost race reaches the product. `racer` must not send
  // through this proxy.
  void LoseNextRace(const std::string& method, const std::string& target_part,
                    std::function<void()> racer);
  // The next request of `method` whose target contains `target_part` is
  // forwarded (the server acts on it), but answered `status` with error
  // `code`: a write that landed whose answer was lost, and whose retry
  // then lost its condition to it.
  void StoreThenFailNext(int status, const std::string& code, const std::string& method,
                         const std::string& target_part);
  // From now on every request carrying `token` as its session token
  // (x-amz-security-token) is answered 400 ExpiredToken, as S3 answers
  // temporary credentials past their expiry. "" for none.
  void ExpireToken(const std::string& token) {
    std::lock_guard lock(mu_);
    expired_token_ = token;
  }
  int requests() const { return requests_; }
  // Requests refused for an expired token so far.
  int expired() const { return expired_; }

 private:
  // Requests to answer with an error instead of (or after) the server's.
  struct Fault {
    int left = 0;
    int status = 0;
    std::string code, method, target;
    std::function<void()> before;  // run before answering
    bool forward_first = false;    // the server still gets the request
  };

  std::unique_ptr<httplib::Server> server_;
  int upstream_port_;
  int port_ = 0;
  // Answers `fault`'s status, with S3's error body unless its code is "".
  static void Refuse(const Fault& fault, httplib::Response& res);

  std::mutex mu_;
  Fault fault_;                // guarded by mu_
  std::string expired_token_;  // guarded by mu_
  std::atomic<int> requests_{0};
  std::atomic<int> expired_{0};
  std::thread thread_;
};

}  // namespace kvfold::live

#endif  // KVFOLD_TESTS_LIVE_S3_SERVER_H_
