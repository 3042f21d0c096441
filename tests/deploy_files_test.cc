// The operator files in deploy/ against what the code serves: the Grafana
// dashboard and the Prometheus alert rules name only series /metrics
// exports, and the dashboard shows every one of them; the systemd unit
// keeps the settings the service relies on.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "kvfold/metrics_text.h"
#include "test_dir.h"

namespace kvfold {
namespace {

// Every family PrometheusText renders, with every optional one present.
std::set<std::string> ServedFamilies() {
  WatchStats w;
  w.cursor = 7;
  ExportStats e;
  e.last_cursor = 7;
  e.last_age_seconds = 1;
  AuditStats a;
  a.divergent_keys = 0;
  a.last_success_unix_seconds = 1;
  const std::string text = PrometheusText(w, &e, &a);
  std::set<std::string> out;
  std::regex type("# TYPE (kvfold_[a-z_]+) ");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), type); it != std::sregex_iterator();
       ++it) {
    out.insert((*it)[1]);
  }
  return out;
}

// The kvfold_ series `text` names, a histogram's _bucket/_sum/_count as
// its family.
std::set<std::string> NamedFamilies(const std::string& text, const std::set<std::string>& served) {
  std::set<std::string> out;
  std::regex name("kvfold_[a-z_]+");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), name); it != std::sregex_iterator();
       ++it) {
    std::string n = it->str();
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (!served.count(n) && n.ends_with(s) && served.count(n.substr(0, n.size() - s.size()))) {
        n = n.substr(0, n.size() - s.size());
      }
    }
    out.insert(n);
  }
  return out;
}

const std::string kDeploy = KVFOLD_SOURCE_DIR "/deploy/";

TEST(DeployFilesTest, TheDashboardShowsEverySeriesAndNoOther) {
  const std::set<std::string> served = ServedFamilies();
  ASSERT_GE(served.size(), 20u);
  const auto dashboard = nlohmann::json::parse(
      ReadWholeFile(kDeploy + "grafana/kvfold-dashboard.json"), nullptr, false);
  ASSERT_FALSE(dashboard.is_discarded()) << "the dashboard is not JSON";
  std::string exprs;
  for (const auto& panel : dashboard["panels"]) {
    ASSERT_TRUE(panel.contains("gridPos") && panel.contains("targets")) << panel.dump();
    for (const auto& target : panel["targets"]) exprs += target["expr"].get<std::string>() + "\n";
  }
  const std::set<std::string> named = NamedFamilies(exprs, served);
  for (const std::string& n : named) EXPECT_TRUE(served.count(n)) << n << " is not served";
  for (const std::string& s : served) EXPECT_TRUE(named.count(s)) << s << " is on no panel";
}

TEST(DeployFilesTest, AlertsNameOnlyServedSeries) {
  const std::set<std::string> served = ServedFamilies();
  const std::string rules = ReadWholeFile(kDeploy + "prometheus/kvfold-alerts.yml");
  ASSERT_FALSE(rules.empty());
  std::string exprs;
  std::regex expr("expr: (.*)");
  for (auto it = std::sregex_iterator(rules.begin(), rules.end(), expr);
       it != std::sregex_iterator(); ++it) {
    exprs += (*it)[1].str() + "\n";
  }
  const std::set<std::string> named = NamedFamilies(exprs, served);
  EXPECT_GE(named.size(), 8u);
  for (const std::string& n : named) EXPECT_TRUE(served.count(n)) << n << " is not served";
}

TEST(DeployFilesTest, TheUnitKeepsWhatTheServiceReliesOn) {
  const std::string unit = ReadWholeFile(kDeploy + "systemd/kvfold-mirror@.service");
  for (const char* line :
       {"Type=notify", "RestartPreventExitStatus=2 3", "EnvironmentFile=/etc/kvfold/%i.env",
        "StateDirectory=kvfold/%i", "User=kvfold", "ProtectSystem=strict", "NoNewPrivileges=yes",
        "ExecStart=/usr/bin/kvfold mirror --fold /var/lib/kvfold/%i $KVFOLD_MIRROR_FLAGS"}) {
    EXPECT_NE(unit.find(std::string("\n") + line + "\n"), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace kvfold
