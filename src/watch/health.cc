#include "kvfold/health.h"

#include <cstdio>

#include "core/mutation.h"

namespace kvfold {
namespace {

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

double SecondsOf(std::chrono::milliseconds d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

HealthVerdict JudgeAlive(const WatchStats& stats, const HealthOptions& options) {
  // A long listing reads for minutes without a commit: restarting the
  // process then would only start the repair over.
  if (stats.repairing) return {true, "a repair runs"};
  if (stats.last_activity_age_seconds > SecondsOf(options.max_silence)) {
    return {false, "the watch has not read the stream or committed for " +
                       Seconds(stats.last_activity_age_seconds) + " (limit " +
                       Seconds(SecondsOf(options.max_silence)) + ")"};
  }
  return {true, "the watch is turning (last activity " + Seconds(stats.last_activity_age_seconds) +
                    " ago)"};
}

HealthVerdict JudgeReady(const WatchStats& stats, const HealthOptions& options) {
  HealthVerdict alive = JudgeAlive(stats, options);
  if (!alive.ok) return alive;
  if (stats.repairing) return {false, "a repair is rewriting the fold"};
  if (!stats.caught_up) {
    return {false, "not caught up yet: " + std::to_string(stats.lag_messages) +
                       " messages behind the stream's head"};
  }
  // caught_up and the lag know only the heads read: cut off from the server
  // after it caught up, a watch would read as caught up forever while the
  // stream moves on. A fresh read proves the fold still follows it.
  if (stats.last_read_age_seconds > SecondsOf(options.max_lag) &&
      !KVFOLD_MUTANT("ready-ignore-read-age")) {
    return {false, "no stream read has succeeded for " + Seconds(stats.last_read_age_seconds) +
                       " (limit " + Seconds(SecondsOf(options.max_lag)) +
                       "): the server is unreachable or does not answer"};
  }
  if (stats.lag_seconds > SecondsOf(options.max_lag)) {
    return {false, "lagging: the oldest change not folded is " + Seconds(stats.lag_seconds) +
                       " old (limit " + Seconds(SecondsOf(options.max_lag)) + ")"};
  }
  return {true, "caught up; cursor " + (stats.cursor ? std::to_string(*stats.cursor) : "-") + ", " +
                    std::to_string(stats.lag_messages) + " messages behind"};
}

}  // namespace kvfold
