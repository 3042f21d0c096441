// kvfold dump, scan, get and status: read a fold, also while a mirror
// writes it.

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/connect_flags.h"
#include "core/base64.h"
#include "kvfold/fold.h"
#include "kvfold/scope.h"
#include "store/exact_counts.h"

namespace kvfold::cli {
namespace {

using nlohmann::json;

struct ReadFlags {
  std::string fold;
  std::vector<std::string> scope;  // dump: --scope; scan: one --prefix
  std::string key;                 // get
  bool json = false;
  std::string artifacts;  // status: where the artifacts are, if anywhere
  ConnectOptions connect;
  TransportFlags transport;
};

StatusOr<std::unique_ptr<Fold>> OpenForReading(const std::string& dir) {
  FoldOptions options;
  options.read_only = true;
  return OpenRocksFold(dir, options);
}

// Bytes that are not printable ASCII shown as \xHH, for the text dump.
std::string Printable(std::string_view v) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : v) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// One entry as dump, scan and get print it.
void PrintEntry(std::string_view key, const Entry& e, bool as_json) {
  if (as_json) {
    json line = {{"key", key}, {"revision", e.revision}, {"value", core::Base64Encode(e.value)}};
    std::cout << line.dump() << "\n";
  } else {
    std::cout << key << "\t" << e.revision << "\t" << Printable(e.value) << "\n";
  }
}

// `command` is "dump" or "scan": the live keys under the scope's prefixes.
int RunDump(const ReadFlags& f, const char* command) {
  auto scope = Scope::Make(f.scope);
  if (!scope.ok()) return Report(command, scope.status());
  auto fold = OpenForReading(f.fold);
  if (!fold.ok()) return Report(command, fold.status());
  // Prefixes are disjoint and sorted, so scanning them in order yields keys
  // in byte order overall.
  for (const auto& prefix : scope->prefixes()) {
    Status s = (*fold)->Scan(prefix, /*include_tombstones=*/false,
                             [&](std::string_view key, const Entry& e) {
                               PrintEntry(key, e, f.json);
                               return static_cast<bool>(std::cout);
                             });
    if (!s.ok()) return Report(command, s);
  }
  std::cout.flush();
  return kExitOk;
}

// One key: its value (text: exactly its bytes, then a newline), or exit 4
// with nothing printed when the fold does not hold it live.
int RunGet(const ReadFlags& f) {
  auto fold = OpenForReading(f.fold);
  if (!fold.ok()) return Report("get", fold.status());
  Entry e;
  Status s = (*fold)->Get(f.key, &e);
  if (s.IsNotFound() || (s.ok() && e.deleted)) return kExitNotFound;
  if (!s.ok()) return Report("get", s);
  if (f.json) {
    PrintEntry(f.key, e, true);
  } else {
    std::cout << e.value << "\n";
  }
  std::cout.flush();
  return std::cout ? kExitOk : kExitFailure;
}

int RunStatus(const ReadFlags& f) {
  auto fold = OpenForReading(f.fold);
  if (!fold.ok()) return Report("status", fold.status());
  auto stored = (*fold)->ReadMeta();
  if (!stored.ok()) return Report("status", stored.status());
  // A catch-up that skipped the counts has not recounted yet: count now.
  const bool counts_stale = stored->counts_stale;
  auto meta = counts_stale ? store::ReadExactMeta(**fold) : stored;
  if (!meta.ok()) return Report("status", meta.status());
  const std::vector<std::string> scope = meta->scope ? *meta->scope : std::vector<std::string>{};
  // A seed that stopped part way: a mirror refuses the fold until
  // `kvfold seed` finishes it, so an operator must see it here.
  const bool unfinished_seed = meta->unfinished_seed();
  std::string artifact_summary;
  if (!f.artifacts.empty()) {
    auto at = OpenTransport(f.artifacts, f.connect, f.transport.options);
    if (!at.ok()) return Report("status", at.status().WithContext("--artifacts"));
    auto summary = LatestArtifactSummary(**at, f.json);
    if (!summary.ok()) return Report("status", summary.status().WithContext("--artifacts"));
    artifact_summary = std::move(summary).value();
  }
  if (f.json) {
    json out = {
        {"fold", f.fold},
        {"bucket", meta->bucket},
        {"cursor", meta->cursor ? json(*meta->cursor) : json(nullptr)},
        {"keys", meta->live_keys},
        {"tombstones", meta->entries - meta->live_keys},
        {"counts_stale", counts_stale},
        {"scope", scope},
        {"stream_created", meta->stream_created},
        {"eviction_observed", meta->eviction_observed},
        {"eviction_cause", meta->eviction_observed ? json(meta->eviction_cause) : json(nullptr)},
        {"last_repair", meta->last_repair.empty() ? json(nullptr) : json(meta->last_repair)},
        {"unfinished_seed", unfinished_seed ? json(meta->seeding) : json(nullptr)}};
    if (!artifact_summary.empty()) out["latest_artifact"] = json::parse(artifact_summary);
    std::cout << out.dump() << "\n";
    return kExitOk;
  }
  std::string scope_text;
  for (const auto& p : scope) {
    scope_text += scope_text.empty() ? "" : ", ";
    scope_text += p.empty() ? "<whole bucket>" : p;
  }
  std::cout << "fold:           " << f.fold << "\n"
            << "bucket:         " << (meta->bucket.empty() ? "<none>" : meta->bucket) << "\n"
            << "scope:          " << (scope_text.empty() ? "<none>" : scope_text) << "\n"
            << "cursor:         " << (meta->cursor ? std::to_string(*meta->cursor) : "<none>")
            << "\n"
            << "keys:           " << meta->live_keys
            << (counts_stale ? " (counted now: the fold recounts once its catch-up ends)" : "")
            << "\n"
            << "tombstones:     " << meta->entries - meta->live_keys << "\n"
            << "stream created: "
            << (meta->stream_created.empty() ? "<none>" : meta->stream_created) << "\n"
            << "eviction seen:  "
            << (meta->eviction_observed ? "yes, by " + meta->eviction_cause +
                                              " (key listings are never taken for the truth)"
                                        : std::string("no"))
            << "\n"
            << "last repair:    " << (meta->last_repair.empty() ? "<none>" : meta->last_repair)
            << "\n";
  if (unfinished_seed) {
    std::cout << "unfinished seed: from artifact " << meta->seeding
              << " (a mirror refuses this fold; re-run `kvfold seed` to finish it)\n";
  }
  std::cout << artifact_summary;
  return kExitOk;
}

}  // namespace

Runner AddDumpCommand(CLI::App& app) {
  auto flags = std::make_shared<ReadFlags>();
  CLI::App* cmd =
      app.add_subcommand("dump",
                         "Print the fold's live keys sorted by key bytes; safe while a mirror "
                         "writes the fold. Text: key<TAB>revision<TAB>value. --json: one "
                         "{\"key\",\"revision\",\"value\"(base64)} object per line.");
  cmd->add_option("--fold", flags->fold, "fold directory")->required();
  cmd->add_option("--scope", flags->scope, "only keys with this prefix; repeatable");
  cmd->add_flag("--json", flags->json, "one JSON object per line");
  return [flags] { return RunDump(*flags, "dump"); };
}

Runner AddScanCommand(CLI::App& app) {
  auto flags = std::make_shared<ReadFlags>();
  flags->scope.emplace_back();
  CLI::App* cmd = app.add_subcommand(
      "scan",
      "Print the fold's live keys under a prefix, sorted by key bytes, as dump does; safe while "
      "a mirror writes the fold. No key under it is not an error (exit 0, no output).");
  cmd->add_option("--fold", flags->fold, "fold directory")->required();
  cmd->add_option("--prefix", flags->scope.front(), "key prefix (default: every key)");
  cmd->add_flag("--json", flags->json, "one JSON object per line");
  return [flags] { return RunDump(*flags, "scan"); };
}

Runner AddGetCommand(CLI::App& app) {
  auto flags = std::make_shared<ReadFlags>();
  CLI::App* cmd = app.add_subcommand(
      "get",
      "Print one key's value as the fold holds it; safe while a mirror writes the fold. Exit "
      "0 and the value (its bytes, then a newline), or exit 4 and nothing when the fold does "
      "not hold the key live.");
  cmd->add_option("--fold", flags->fold, "fold directory")->required();
  cmd->add_option("key", flags->key, "the key")->required();
  cmd->add_flag("--json", flags->json, "one JSON object: key, revision, value (base64)");
  return [flags] { return RunGet(*flags); };
}

Runner AddStatusCommand(CLI::App& app) {
  auto flags = std::make_shared<ReadFlags>();
  CLI::App* cmd =
      app.add_subcommand("status",
                         "Print the fold's bucket, scope, cursor and key count; safe while a "
                         "mirror writes the fold.");
  cmd->add_option("--fold", flags->fold, "fold directory")->required();
  cmd->add_option("--artifacts", flags->artifacts,
                  "also show the latest artifact at this location (dir:PATH, obj:BUCKET, "
                  "s3://BUCKET/PREFIX): its cursor, its anchor's age and whether a restore "
                  "takes it by the marker window");
  AddConnectFlags(cmd, &flags->connect);
  AddTransportFlags(cmd, &flags->transport);
  cmd->add_flag("--json", flags->json,
                "one JSON object: fold, bucket, cursor, keys, tombstones, scope, "
                "eviction_observed, eviction_cause, last_repair, stream_created, "
                "unfinished_seed, and with --artifacts latest_artifact");
  return [flags] {
    if (!flags->artifacts.empty()) {
      KVFOLD_RETURN_IF_ERROR_EXIT("status", ResolveConnectFlags(&flags->connect, false));
      KVFOLD_RETURN_IF_ERROR_EXIT("status", ResolveTransportFlags(&flags->transport));
    }
    return RunStatus(*flags);
  };
}

}  // namespace kvfold::cli
