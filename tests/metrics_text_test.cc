// PrometheusText: the exposition format a Prometheus server parses, and the
// exact samples the shipped dashboard and alerts read (deploy_files_test.cc
// checks the family names against them).

#include "kvfold/metrics_text.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace kvfold {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool HasLine(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

// Every family opens with its HELP and TYPE lines, appears once, and each
// sample line belongs to the family opened last (a histogram's through its
// _bucket, _sum and _count series): what the 0.0.4 text format requires.
// Returns each family's type.
std::map<std::string, std::string> CheckFormat(const std::string& text) {
  std::map<std::string, std::string> types;
  std::string family, type;
  const std::vector<std::string> lines = Lines(text);
  EXPECT_TRUE(text.empty() || text.back() == '\n') << "the last line is not ended";
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.starts_with("# HELP ")) {
      family = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_FALSE(types.count(family)) << family << " appears twice";
      EXPECT_GT(line.size(), 7 + family.size() + 1) << family << " has no help text";
      if (i + 1 == lines.size()) {
        ADD_FAILURE() << family << " has no TYPE line";
        break;
      }
      const std::string type_prefix = "# TYPE " + family + " ";
      EXPECT_TRUE(lines[i + 1].starts_with(type_prefix)) << lines[i + 1];
      type = lines[i + 1].substr(type_prefix.size());
      EXPECT_TRUE(type == "counter" || type == "gauge" || type == "histogram") << type;
      types[family] = type;
      ++i;
      continue;
    }
    if (family.empty()) {
      ADD_FAILURE() << "a sample before any family: " << line;
      continue;
    }
    const std::string name = line.substr(0, line.find_first_of("{ "));
    std::set<std::string> allowed = {family};
    if (type == "histogram") allowed = {family + "_bucket", family + "_sum", family + "_count"};
    EXPECT_TRUE(allowed.count(name)) << line << " under family " << family;
    const std::string value = line.substr(line.rfind(' ') + 1);
    EXPECT_FALSE(value.empty()) << line;
    if (type == "counter") {
      EXPECT_EQ(value.find('-'), std::string::npos) << line;
    }
  }
  return types;
}

TEST(MetricsTextTest, AFreshWatchRendersEveryWatchFamilyInTheTextFormat) {
  const std::string text = PrometheusText(WatchStats{});
  const auto types = CheckFormat(text);
  EXPECT_EQ(types.at("kvfold_changes_total"), "counter");
  EXPECT_EQ(types.at("kvfold_lag_seconds"), "gauge");
  EXPECT_EQ(types.at("kvfold_commit_duration_seconds"), "histogram");
  EXPECT_EQ(types.at("kvfold_reconnects_total"), "counter");
  // Unknown is left out, not rendered as 0: no cursor before the first
  // commit, no export or audit series without their stats.
  EXPECT_FALSE(types.count("kvfold_cursor"));
  for (const auto& [name, type] : types) {
    EXPECT_FALSE(name.starts_with("kvfold_export")) << name;
    EXPECT_FALSE(name.starts_with("kvfold_last_export")) << name;
    EXPECT_FALSE(name.starts_with("kvfold_audit")) << name;
  }
  // Every op and origin pair is a series from the start (a counter that
  // appears only once it counts hides its first increase from rate()).
  EXPECT_TRUE(HasLine(text, "kvfold_changes_total{op=\"put\",origin=\"live\"} 0"));
  EXPECT_TRUE(HasLine(text, "kvfold_changes_total{op=\"purge\",origin=\"reconcile\"} 0"));
  EXPECT_TRUE(HasLine(text, "kvfold_caught_up 0"));
}

TEST(MetricsTextTest, SamplesCarryTheStatsValues) {
  WatchStats w;
  w.changes[static_cast<size_t>(Op::kDelete)][static_cast<size_t>(ChangeOrigin::kRestore)] = 7;
  w.cursor = 1234567890123;
  w.stream_last_seq = 1234567890125;
  w.lag_messages = 2;
  w.lag_seconds = 1.5;
  w.caught_up = true;
  w.last_read_age_seconds = 0.25;
  w.repairs[static_cast<size_t>(RepairKind::kRestore)][static_cast<size_t>(RepairOutcome::kDone)] =
      3;
  w.resets[static_cast<size_t>(ResetCause::kSlowConsumer)] = 4;
  const std::string text = PrometheusText(w);
  CheckFormat(text);
  EXPECT_TRUE(HasLine(text, "kvfold_changes_total{op=\"delete\",origin=\"restore\"} 7"));
  EXPECT_TRUE(HasLine(text, "kvfold_cursor 1234567890123")) << "a sequence is never rounded";
  EXPECT_TRUE(HasLine(text, "kvfold_stream_last_sequence 1234567890125"));
  EXPECT_TRUE(HasLine(text, "kvfold_lag_messages 2"));
  EXPECT_TRUE(HasLine(text, "kvfold_lag_seconds 1.5"));
  EXPECT_TRUE(HasLine(text, "kvfold_caught_up 1"));
  EXPECT_TRUE(HasLine(text, "kvfold_last_stream_read_age_seconds 0.25"));
  EXPECT_TRUE(HasLine(text, "kvfold_repairs_total{action=\"restore\",outcome=\"done\"} 3"));
  EXPECT_TRUE(HasLine(text, "kvfold_delivery_resets_total{cause=\"slow_consumer\"} 4"));
}

TEST(MetricsTextTest, TheCommitHistogramIsCumulative) {
  WatchStats w;
  w.commit_latency[0] = 2;      // <= 0.0005 s
  w.commit_latency[3] = 1;      // <= 0.005 s
  w.commit_latency.back() = 1;  // above the last bound
  w.commit_latency_sum = 3.0 + 0.004 + 0.0002;
  const std::string text = PrometheusText(w);
  CheckFormat(text);
  const std::string h = "kvfold_commit_duration_seconds";
  EXPECT_TRUE(HasLine(text, h + "_bucket{le=\"0.0005\"} 2"));
  EXPECT_TRUE(HasLine(text, h + "_bucket{le=\"0.0025\"} 2"));
  EXPECT_TRUE(HasLine(text, h + "_bucket{le=\"0.005\"} 3"));
  EXPECT_TRUE(HasLine(text, h + "_bucket{le=\"2.5\"} 3"));
  EXPECT_TRUE(HasLine(text, h + "_bucket{le=\"+Inf\"} 4"));
  EXPECT_TRUE(HasLine(text, h + "_count 4"));
  EXPECT_TRUE(HasLine(text, h + "_sum 3.0042"));
  // One bucket per bound plus +Inf, in increasing order.
  size_t buckets = 0;
  for (const std::string& line : Lines(text)) buckets += line.starts_with(h + "_bucket{");
  EXPECT_EQ(buckets, WatchStats::kLatencyBounds.size() + 1);
}

TEST(MetricsTextTest, ExportSeriesAppearWithTheExportStats) {
  ExportStats e;
  e.written = 5;
  e.other_node = 2;
  std::string text = PrometheusText(WatchStats{}, &e);
  auto types = CheckFormat(text);
  EXPECT_TRUE(HasLine(text, "kvfold_exports_total{outcome=\"written\"} 5"));
  EXPECT_TRUE(HasLine(text, "kvfold_exports_total{outcome=\"other_node\"} 2"));
  EXPECT_TRUE(HasLine(text, "kvfold_exports_total{outcome=\"failed\"} 0"));
  EXPECT_FALSE(types.count("kvfold_last_export_age_seconds")) << "no artifact written yet";

  e.last_cursor = 99;
  e.last_age_seconds = 12.5;
  text = PrometheusText(WatchStats{}, &e);
  types = CheckFormat(text);
  EXPECT_TRUE(HasLine(text, "kvfold_last_export_age_seconds 12.5"));
  EXPECT_TRUE(HasLine(text, "kvfold_last_export_cursor 99"));
}

TEST(MetricsTextTest, AuditSeriesAppearWithTheAuditStats) {
  AuditStats a;
  a.failed = 1;
  std::string text = PrometheusText(WatchStats{}, nullptr, &a);
  auto types = CheckFormat(text);
  EXPECT_TRUE(HasLine(text, "kvfold_audits_total{outcome=\"failed\"} 1"));
  EXPECT_TRUE(HasLine(text, "kvfold_audits_total{outcome=\"equal\"} 0"));
  EXPECT_FALSE(types.count("kvfold_audit_divergent_keys")) << "no audit judged yet";
  EXPECT_FALSE(types.count("kvfold_audit_last_success_timestamp_seconds"));
  EXPECT_FALSE(types.count("kvfold_exports_total"));

  a.divergent = 1;
  a.divergent_keys = 3;
  a.last_success_unix_seconds = 1700000123.75;
  text = PrometheusText(WatchStats{}, nullptr, &a);
  CheckFormat(text);
  EXPECT_TRUE(HasLine(text, "kvfold_audit_divergent_keys 3"));
  // Whole seconds, never %g's rounding (1.70000e+09 would be 123 s off).
  EXPECT_TRUE(HasLine(text, "kvfold_audit_last_success_timestamp_seconds 1700000123"));
}

}  // namespace
}  // namespace kvfold
