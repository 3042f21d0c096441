#include "live/nats_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace kvfold::live {
namespace {

bool SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads what is there (blocking for at least one byte); false at EOF or error.
bool ReadSome(int fd, std::string* into) {
  char buf[64 * 1024];
  while (true) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    into->append(buf, static_cast<size_t>(n));
    return true;
  }
}

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// Where the frame whose first line ends at `eol` ends, for a frame with a
// payload (its last field is the payload's size), given how many fields it
// has with a reply subject. npos while incomplete. A line
// that does not parse stops the test: the proxy would corrupt the stream.
size_t PayloadFrameEnd(std::string_view b, size_t eol, const std::vector<std::string_view>& f,
                       size_t with_reply, std::string_view line) {
  if (f.size() != with_reply && f.size() != with_reply - 1) {
    std::fprintf(stderr, "nats proxy: unparsable line: %.*s\n", static_cast<int>(line.size()),
                 line.data());
    std::abort();
  }
  size_t total = 0;
  const std::string_view size = f.back();
  if (std::from_chars(size.data(), size.data() + size.size(), total).ec != std::errc()) {
    std::fprintf(stderr, "nats proxy: bad size in: %.*s\n", static_cast<int>(line.size()),
                 line.data());
    std::abort();
  }
  const size_t end = eol + 2 + total + 2;  // payload, then its CRLF
  return b.size() < end ? std::string_view::npos : end;
}

void NoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

NatsProxy::NatsProxy(int server_port) : server_port_(server_port) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;  // the kernel picks a free port; no race with FreePort()
  socklen_t len = sizeof(addr);
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listen_fd_, 16) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("nats proxy: cannot listen on loopback");
    std::abort();
  }
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

NatsProxy::~NatsProxy() {
  stopping_ = true;
  // shutdown() wakes the blocked accept() and recv() calls; the fds are
  // closed only after the threads using them are joined.
  shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  close(listen_fd_);
  // Joined without the lock: a reader may be waiting for it in TakeDrop.
  std::vector<std::unique_ptr<Link>> links;
  {
    std::lock_guard<std::mutex> lock(mu_);
    links.swap(links_);
  }
  for (auto& link : links) {
    shutdown(link->client, SHUT_RDWR);
    shutdown(link->server, SHUT_RDWR);
    link->up.join();
    link->down.join();
    close(link->client);
    close(link->server);
  }
}

void NatsProxy::DropNextDelivery(const std::string& subject) {
  std::lock_guard<std::mutex> lock(mu_);
  drop_subject_ = subject;
}

bool NatsProxy::TakeDrop(std::string_view subject, std::string_view reply) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!drop_subject_ || subject != *drop_subject_ || !reply.starts_with("$JS.ACK.")) {
    return false;
  }
  drop_subject_.reset();
  ++dropped_;
  return true;
}

bool NatsProxy::Silenced(std::string_view reply, std::string_view frame,
                         size_t header_start) const {
  if (!silenced_) return false;
  if (reply.starts_with("$JS.ACK.")) return true;
  return header_start != std::string_view::npos &&
         frame.substr(header_start).starts_with("NATS/1.0 100");
}

void NatsProxy::AcceptLoop() {
  while (!stopping_) {
    const int client = accept(listen_fd_, nullptr, nullptr);
    if (client < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // shut down
    }
    const int server = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(server_port_));
    if (server < 0 || connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      // As a dead server looks to the client: the connection closes.
      if (server >= 0) close(server);
      close(client);
      continue;
    }
    NoDelay(client);
    NoDelay(server);
    ++accepted_;
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      close(client);
      close(server);
      return;
    }
    auto link = std::make_unique<Link>();
    link->client = client;
    link->server = server;
    Link* l = link.get();
    l->up = std::thread([this, l] { CopyUp(l); });
    l->down = std::thread([this, l] { CopyDown(l); });
    links_.push_back(std::move(link));
  }
}

// Either side closing closes the other, as a real connection loss would.
void NatsProxy::CopyUp(Link* link) {
  std::string buf, out;
  while (ReadSome(link->client, &buf)) {
    FilterClientBytes(&buf, &out);
    if (!SendAll(link->server, out)) break;
    out.clear();
  }
  shutdown(link->server, SHUT_RDWR);
  shutdown(link->client, SHUT_RDWR);
}

void NatsProxy::CopyDown(Link* link) {
  std::string buf, out;
  while (ReadSome(link->server, &buf)) {
    FilterServerBytes(&buf, &out);
    if (!SendAll(link->client, out)) break;
    out.clear();
  }
  shutdown(link->server, SHUT_RDWR);
  shutdown(link->client, SHUT_RDWR);
}

template <typename Keep>
void NatsProxy::SplitFrames(std::string* buffer, std::string* out, std::string_view op,
                            std::string_view header_op, size_t with_reply, Keep keep) {
  const std::string& b = *buffer;
  size_t start = 0;
  while (true) {
    const size_t eol = b.find("\r\n", start);
    if (eol == std::string::npos) break;
    const std::string_view line(b.data() + start, eol - start);
    const bool plain = line.starts_with(op);
    const bool headed = line.starts_with(header_op);
    if (!plain && !headed) {  // every other operation is one line
      out->append(b, start, eol + 2 - start);
      start = eol + 2;
      continue;
    }
    const auto f = Fields(line);
    const size_t end = PayloadFrameEnd(b, eol, f, headed ? with_reply + 1 : with_reply, line);
    if (end == std::string_view::npos) break;  // the rest is still on its way
    const std::string_view frame(b.data() + start, end - start);
    if (keep(f, frame, headed ? eol + 2 - start : std::string_view::npos)) {
      out->append(b, start, end - start);
    }
    start = end;
  }
  buffer->erase(0, start);
}

void NatsProxy::FilterServerBytes(std::string* buffer, std::string* out) {
  // MSG <subject> <sid> [reply] <#bytes>
  // HMSG <subject> <sid> [reply] <#header bytes> <#total bytes>
  SplitFrames(
      buffer, out, "MSG ", "HMSG ", 5,
      [this](const std::vector<std::string_view>& f, std::string_view frame, size_t header_start) {
        const size_t with_reply = header_start == std::string_view::npos ? 5 : 6;
        const std::string_view reply = f.size() == with_reply ? f[3] : std::string_view();
        if (Silenced(reply, frame, header_start)) {
          ++dropped_;
          return false;
        }
        return !TakeDrop(f[1], reply);
      });
}

void NatsProxy::FilterClientBytes(std::string* buffer, std::string* out) {
  // PUB <subject> [reply] <#bytes>
  // HPUB <subject> [reply] <#header bytes> <#total bytes>
  SplitFrames(buffer, out, "PUB ", "HPUB ", 4,
              [this](const std::vector<std::string_view>& f, std::string_view, size_t) {
                if (losing_deletes_ && f[1].starts_with("$JS.API.CONSUMER.DELETE.")) {
                  ++lost_deletes_;
                  return false;
                }
                return true;
              });
}

}  // namespace kvfold::live
