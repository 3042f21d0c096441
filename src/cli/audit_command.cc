// kvfold audit: does this fold equal its bucket? Read-only on both sides,
// safe beside a running mirror and live writers (kvfold/audit.h).

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/connect_flags.h"
#include "kvfold/audit.h"
#include "kvfold/connection.h"

namespace kvfold::cli {
namespace {

using nlohmann::json;

struct AuditFlags {
  ConnectOptions connect;
  std::string fold;
  std::string bucket;
  double max_reads_per_second = 100;
  size_t max_named = 20;
  bool json = false;
  bool values = false;
};

json ReportJson(const AuditReport& r) {
  json named = json::array();
  for (const auto& n : r.named) {
    named.push_back(
        {{"key", n.key},
         {"finding", AuditFindingName(n.finding)},
         {"fold_revision", n.fold_revision ? json(n.fold_revision) : json(nullptr)},
         {"bucket_revision", n.bucket_revision ? json(n.bucket_revision) : json(nullptr)}});
  }
  return {{"verdict", r.divergent() > 0 ? "divergent" : "equal"},
          {"cursor", r.cursor},
          {"listing_revision", r.listing_revision},
          {"judged", r.judged},
          {"in_flight", r.in_flight},
          {"kept", r.kept},
          {"divergent", r.divergent()},
          {"missing", r.missing},
          {"stale", r.stale},
          {"phantom", r.phantom},
          {"value", r.value_differs},
          {"values_compared", r.values_compared},
          {"first", named}};
}

void PrintText(const AuditReport& r) {
  if (r.divergent() == 0) {
    std::cout << "equal at cursor " << r.cursor << ": " << r.judged << " keys judged";
  } else {
    std::cout << "DIVERGENT at cursor " << r.cursor << ": " << r.divergent() << " of " << r.judged
              << " keys judged differ (missing " << r.missing << ", stale " << r.stale
              << ", phantom " << r.phantom << ", value " << r.value_differs << ")";
  }
  std::cout << "; " << r.in_flight << " in flight (changed after the cursor, not judged); "
            << r.kept << " kept (evicted from the stream, held by the fold)";
  if (r.values_compared > 0) std::cout << "; " << r.values_compared << " values compared";
  std::cout << "\n";
  auto revision = [](uint64_t rev) { return rev ? std::to_string(rev) : std::string("-"); };
  for (const auto& n : r.named) {
    std::cout << "  " << AuditFindingName(n.finding) << "\t" << n.key
              << "\tfold: " << revision(n.fold_revision)
              << "\tbucket: " << revision(n.bucket_revision) << "\n";
  }
  if (r.divergent() > r.named.size()) {
    std::cout << "  ... and " << r.divergent() - r.named.size() << " more\n";
  }
}

int RunAudit(AuditFlags& f) {
  KVFOLD_RETURN_IF_ERROR_EXIT("audit", ResolveConnectFlags(&f.connect, true));
  FoldOptions fo;
  fo.read_only = true;  // beside a running mirror
  auto fold = OpenRocksFold(f.fold, fo);
  if (!fold.ok()) return Report("audit", fold.status());
  std::string bucket = f.bucket;
  if (bucket.empty()) {
    auto meta = (*fold)->ReadMeta();
    if (!meta.ok()) return Report("audit", meta.status());
    if (meta->bucket.empty()) {
      return Report("audit",
                    Status::FailedPrecondition("fold " + f.fold + " has never mirrored a bucket"));
    }
    bucket = meta->bucket;
  }
  auto source = OpenNatsBucket(f.connect, bucket);
  if (!source.ok()) return Report("audit", source.status());
  AuditOptions options;
  options.max_reads_per_second = f.max_reads_per_second;
  options.max_named = f.max_named;
  options.compare_values = f.values;
  auto report = Audit(**source, **fold, options);
  if (!report.ok()) return Report("audit", report.status());
  if (f.json) {
    std::cout << ReportJson(*report).dump() << "\n";
  } else {
    PrintText(*report);
  }
  std::cout.flush();
  if (!std::cout) return kExitFailure;
  return report->divergent() > 0 ? kExitDivergent : kExitOk;
}

}  // namespace

Runner AddAuditCommand(CLI::App& app) {
  auto f = std::make_shared<AuditFlags>();
  CLI::App* cmd = app.add_subcommand(
      "audit",
      "Check a fold against its bucket, online: every key in the fold's scope that neither side "
      "changed after the fold's cursor must match (live at the same revision, or deleted). Exit "
      "0 equal, 5 divergent (the first keys named), 1 cannot judge.");
  cmd->add_option("--fold", f->fold, "fold directory")->required();
  cmd->add_option("--bucket", f->bucket, "the bucket (default: the one the fold mirrors)");
  AddConnectFlags(cmd, &f->connect);
  cmd->add_option("--max-reads-per-second", f->max_reads_per_second,
                  "reads of a key's last message per second, one per fold key the listing did "
                  "not name (0: unpaced, else at least 0.01; default 100)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--show", f->max_named, "how many divergent keys to name (default 20)")
      ->check(kCount);
  cmd->add_flag("--values", f->values,
                "also compare values, where the fold holds a key at the revision of the bucket's "
                "last message of it (reads every value in scope once: a state-sync delivery)");
  cmd->add_flag("--json", f->json,
                "one JSON object: verdict, cursor, listing_revision, judged, in_flight, kept, "
                "divergent, missing, stale, phantom, value, values_compared, first[] (key, "
                "finding, fold_revision, "
                "bucket_revision)");
  return [f] { return RunAudit(*f); };
}

}  // namespace kvfold::cli
