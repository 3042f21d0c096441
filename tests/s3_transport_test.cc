// The S3 transport against a scripted HTTP server on loopback: how it reads
// the answers that decide whether a bucket exists. A bare 404 (no S3 error
// code: a proxy, a wrong endpoint or path) never means absent; only S3's
// own NoSuchBucket does (issue 31, defect 9(b)).

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "kvfold/connection.h"
#include "kvfold/transport.h"

namespace kvfold {
namespace {

// Answers every HEAD with a bare 404 (HEAD has no body), and every GET
// with `get_status` and `get_body`; counts the PUTs (a bucket made).
class ScriptedS3 {
 public:
  ScriptedS3(int get_status, std::string get_body)
      : get_status_(get_status), get_body_(std::move(get_body)) {
    server_.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
      res.status = req.method == "HEAD" ? 404 : get_status_;
      if (req.method != "HEAD" && !get_body_.empty()) res.set_content(get_body_, "application/xml");
    });
    server_.Put(".*", [this](const httplib::Request&, httplib::Response& res) {
      ++puts_;
      res.status = 200;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~ScriptedS3() {
    server_.stop();
    thread_.join();
  }
  ScriptedS3(const ScriptedS3&) = delete;
  ScriptedS3& operator=(const ScriptedS3&) = delete;

  TransportOptions Options(bool create_if_missing) const {
    TransportOptions o;
    o.create_if_missing = create_if_missing;
    o.s3.endpoint = "http://127.0.0.1:" + std::to_string(port_);
    o.s3.region = "us-east-1";
    o.s3.addressing = S3Options::Addressing::kPath;
    o.s3.max_attempts = 1;
    o.s3.allow_unconditional_pointer = true;
    return o;
  }
  int puts() const { return puts_; }

 private:
  httplib::Server server_;
  int get_status_;
  std::string get_body_;
  int port_ = 0;
  std::atomic<int> puts_{0};
  std::thread thread_;
};

class S3TransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("AWS_ACCESS_KEY_ID", "test", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "test", 1);
    unsetenv("AWS_SESSION_TOKEN");
  }
};

// Guards §6/§2.6: a wrong endpoint gets a specific error, never "no bucket"
// (a reader would wait for artifacts that exist; an exporter would make a
// bucket through whatever answered).
TEST_F(S3TransportTest, BareNotFoundOnBucketHeadIsNotAbsence) {
  ScriptedS3 server(404, "");
  auto reader = OpenTransport("s3://some-bucket", ConnectOptions{}, server.Options(false));
  ASSERT_FALSE(reader.ok());
  EXPECT_FALSE(reader.status().IsNotFound()) << reader.status().ToString();
  EXPECT_NE(reader.status().message().find("404"), std::string::npos) << reader.status().ToString();
  auto exporter = OpenTransport("s3://some-bucket", ConnectOptions{}, server.Options(true));
  ASSERT_FALSE(exporter.ok());
  EXPECT_FALSE(exporter.status().IsNotFound()) << exporter.status().ToString();
  EXPECT_EQ(server.puts(), 0) << "a bucket was made after a bare 404";
}

TEST_F(S3TransportTest, NoSuchBucketIsAbsence) {
  ScriptedS3 server(404,
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchBucket</Code>"
                    "<Message>The specified bucket does not exist</Message></Error>");
  auto reader = OpenTransport("s3://some-bucket", ConnectOptions{}, server.Options(false));
  EXPECT_TRUE(reader.status().IsNotFound()) << reader.status().ToString();
  EXPECT_EQ(server.puts(), 0);
}

// A bucket whose objects a hostile writer made: "declared" says 256 MiB in
// its Content-Length, "unsized" and "LATEST" send as much without one
// (ended by the connection's close), "small" is 10 bytes; anything else is
// NoSuchKey.
// Counts the body bytes it got out.
class HugeObjectS3 {
 public:
  HugeObjectS3() {
    server_.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
      auto endless = [this](size_t offset, httplib::DataSink& sink) {
        static const std::string block(64 << 10, 'z');
        if (offset >= kHuge) {
          sink.done();
          return true;
        }
        if (!sink.write(block.data(), block.size())) return false;
        sent_ += block.size();
        return true;
      };
      if (req.method == "HEAD") {
        res.status = 200;
      } else if (req.path.ends_with("/declared")) {
        res.set_content_provider(kHuge, "application/octet-stream",
                                 [endless](size_t offset, size_t, httplib::DataSink& sink) {
                                   return endless(offset, sink);
                                 });
      } else if (req.path.ends_with("/unsized") || req.path.ends_with("/LATEST")) {
        res.set_content_provider("application/octet-stream", endless);
      } else if (req.path.ends_with("/small")) {
        res.set_content("0123456789", "application/octet-stream");
      } else {
        res.status = 404;
        res.set_content(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchKey</Code>"
            "<Message>The specified key does not exist.</Message></Error>",
            "application/xml");
      }
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~HugeObjectS3() {
    server_.stop();
    thread_.join();
  }
  HugeObjectS3(const HugeObjectS3&) = delete;
  HugeObjectS3& operator=(const HugeObjectS3&) = delete;

  TransportOptions Options() const {
    TransportOptions o;
    o.s3.endpoint = "http://127.0.0.1:" + std::to_string(port_);
    o.s3.region = "us-east-1";
    o.s3.addressing = S3Options::Addressing::kPath;
    o.s3.max_attempts = 1;
    return o;
  }
  uint64_t sent() const { return sent_; }

  static constexpr size_t kHuge = size_t{256} << 20;

 private:
  httplib::Server server_;
  int port_ = 0;
  std::atomic<uint64_t> sent_{0};
  std::thread thread_;
};

// Guards the reader's memory against a hostile writer to the bucket: an
// object larger than what its reader takes (a manifest's cap, a chunk's
// size in the manifest) is refused without its body being read, whether
// the answer declares its length or not; a missing small object is still
// NotFound (its error answer is read even when it is larger than the
// object asked for).
TEST_F(S3TransportTest, AnObjectLargerThanItsReaderTakesIsRefusedUnread) {
  HugeObjectS3 server;
  auto t = OpenTransport("s3://some-bucket", ConnectOptions{}, server.Options());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (const std::string name : {"declared", "unsized"}) {
    SCOPED_TRACE(name);
    const auto start = std::chrono::steady_clock::now();
    auto got = (*t)->Get(name, 1 << 20);
    ASSERT_FALSE(got.ok());
    EXPECT_TRUE(got.status().IsCorruption()) << got.status().ToString();
    EXPECT_NE(got.status().message().find(
                  name == "declared" ? "object declared in s3://some-bucket is 268435456 bytes, "
                                       "more than the 1048576 expected of it"
                                     : "object unsized in s3://some-bucket holds more than the "
                                       "1048576 bytes expected of it"),
              std::string::npos)
        << got.status().ToString();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  }
  auto pointer = (*t)->ReadPointer();
  EXPECT_TRUE(pointer.status().IsCorruption()) << pointer.status().ToString();
  EXPECT_NE(pointer.status().message().find("the latest pointer of s3://some-bucket holds more "
                                            "than 65536 bytes"),
            std::string::npos)
      << pointer.status().ToString();
  // What the server got out before the client hung up (socket buffers).
  EXPECT_LT(server.sent(), uint64_t{32} << 20);
  EXPECT_EQ(*(*t)->Get("small", 10), "0123456789");
  auto small_over = (*t)->Get("small", 9);
  EXPECT_TRUE(small_over.status().IsCorruption()) << small_over.status().ToString();
  auto missing = (*t)->Get("missing", 10);
  EXPECT_TRUE(missing.status().IsNotFound()) << missing.status().ToString();
}

}  // namespace
}  // namespace kvfold
