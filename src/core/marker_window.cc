#include "core/marker_window.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <ctime>

#include "core/mutation.h"

namespace kvfold::core {
namespace {

constexpr int64_t kNsPerMs = 1000000;
constexpr int64_t kNsPerSec = 1000000000;
constexpr int64_t kMinMarginNs = 250 * kNsPerMs;

std::string Seconds(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(ns) / kNsPerSec);
  return buf;
}

}  // namespace

std::optional<int64_t> MarkerWindowNs(const StreamState& stream) {
  if (stream.marker_ttl_ns <= 0) return std::nullopt;
  const int64_t margin = std::max(stream.marker_ttl_ns / 10, kMinMarginNs);
  return stream.marker_ttl_ns - margin;
}

std::chrono::milliseconds QuarterWindow(int64_t window_ns) {
  return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::nanoseconds(window_ns / 4)),
                  std::chrono::milliseconds(10));
}

bool InsideMarkerWindow(int64_t anchor_ns, int64_t now_ns, int64_t window_ns) {
  if (anchor_ns <= 0 || now_ns <= 0) return false;
  return now_ns - anchor_ns < window_ns;
}

bool MarkerTtl::Observe(const StreamState& s, int64_t anchor_ns) {
  const int64_t now = s.marker_ttl_ns > 0 ? s.marker_ttl_ns : 0;
  const int64_t before = effective_;
  if (now == effective_) {
    change_seen_at_ = 0;
  } else if (effective_ == 0 || (now > 0 && now < effective_) ||
             KVFOLD_MUTANT("marker-ttl-raise-at-once")) {
    // First markers (none were written before), or a lower TTL: the new
    // markers expire soonest.
    effective_ = now;
    change_seen_at_ = 0;
  } else {
    // Raised, or turned off: markers after a position anchored before the
    // change was seen may still carry the old TTL. Another change restarts
    // the wait (markers in between carry the middle TTL).
    if (change_seen_at_ == 0 ||
        (changed_to_ != now && !KVFOLD_MUTANT("marker-ttl-keep-first-wait"))) {
      change_seen_at_ = s.server_time_ns;
      changed_to_ = now;
    }
    if (change_seen_at_ > 0 && anchor_ns >= change_seen_at_) {
      effective_ = now;
      change_seen_at_ = 0;
    }
  }
  return effective_ != before;
}

std::string DescribeMarkerWindowMiss(std::string_view what, std::string_view bucket,
                                     int64_t anchor_ns, int64_t now_ns, const StreamState& stream) {
  std::string out(what);
  if (anchor_ns <= 0) {
    out += " has no recorded time (written by an older kvfold, or never anchored)";
  } else if (now_ns <= 0) {
    out += " was last current at " + FormatTimeNs(anchor_ns) +
           ", and the server does not report its clock";
  } else {
    out += " was last current at " + FormatTimeNs(anchor_ns) + " (" + Seconds(now_ns - anchor_ns) +
           " s ago by the server's clock)";
  }
  out += "; limit markers on bucket " + std::string(bucket) + " live " +
         Seconds(stream.marker_ttl_ns) +
         " s, so a key that expired since may have left no trace in the stream";
  return out;
}

std::optional<int64_t> ParseApiTimeNs(std::string_view t) {
  // YYYY-MM-DDTHH:MM:SS[.fraction]Z
  if (t.size() < 20 || t.back() != 'Z' || t[4] != '-' || t[7] != '-' || t[10] != 'T' ||
      t[13] != ':' || t[16] != ':') {
    return std::nullopt;
  }
  auto num = [&t](size_t at, size_t len, int* out) {
    auto [p, ec] = std::from_chars(t.data() + at, t.data() + at + len, *out);
    return ec == std::errc() && p == t.data() + at + len;
  };
  int y, mo, d, h, mi, s;
  if (!num(0, 4, &y) || !num(5, 2, &mo) || !num(8, 2, &d) || !num(11, 2, &h) || !num(14, 2, &mi) ||
      !num(17, 2, &s)) {
    return std::nullopt;
  }
  int64_t frac = 0;
  size_t at = 19;
  if (t[at] == '.') {
    int digits = 0;
    for (++at; at + 1 < t.size(); ++at, ++digits) {
      if (t[at] < '0' || t[at] > '9' || digits >= 9) return std::nullopt;
      frac = frac * 10 + (t[at] - '0');
    }
    if (digits == 0) return std::nullopt;
    for (; digits < 9; ++digits) frac *= 10;
  }
  if (at != t.size() - 1) return std::nullopt;
  if (y == 1 && mo == 1 && d == 1 && h == 0 && mi == 0 && s == 0 && frac == 0) return 0;
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  const std::time_t secs = timegm(&tm);
  if (secs < 0) return std::nullopt;
  return static_cast<int64_t>(secs) * kNsPerSec + frac;
}

std::string FormatTimeNs(int64_t ns) {
  if (ns <= 0) return "<unknown>";
  const std::time_t secs = static_cast<std::time_t>(ns / kNsPerSec);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[48];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>((ns % kNsPerSec) / kNsPerMs));
  return buf;
}

}  // namespace kvfold::core
