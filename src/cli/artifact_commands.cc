// kvfold export, kvfold seed, kvfold artifacts list|inspect|verify|prune.

#include <ctime>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "artifact/signer.h"
#include "cli/commands.h"
#include "cli/connect_flags.h"
#include "cli/logger.h"
#include "cli/progress.h"
#include "core/base64.h"
#include "core/marker_window.h"
#include "kvfold/artifact.h"
#include "kvfold/fold.h"
#include "kvfold/transport.h"

namespace kvfold::cli {
namespace {

using nlohmann::json;

std::string Utc(int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Until when an artifact's anchor keeps it restorable by the marker window
// (ns since the epoch), or nullopt where the bucket writes no limit markers
// (its age does not matter there) or the anchor is unknown. By the server's
// clock at export; a restore checks against the server's clock again, and
// takes an artifact at the stream's last sequence whatever its age.
std::optional<int64_t> CurrentByWindowUntil(const ArtifactManifest& m) {
  StreamState s;
  s.marker_ttl_ns = m.marker_ttl_ns;
  const auto window = core::MarkerWindowNs(s);
  if (!window || m.cursor_time_ns <= 0) return std::nullopt;
  return m.cursor_time_ns + *window;
}

json ManifestJson(const ArtifactManifest& m, bool with_chunks) {
  json j = {
      {"artifact", m.artifact_id},
      {"schema_version", m.schema_version},
      {"min_reader_version", m.min_reader_version},
      {"bucket", m.bucket},
      {"stream_created", m.stream_created},
      {"scope", m.has_scope ? json(m.scope) : json(nullptr)},
      {"cursor", m.cursor},
      {"eviction_observed", m.eviction_observed},
      {"eviction_cause", m.eviction_observed ? json(m.eviction_cause) : json(nullptr)},
      {"created", Utc(m.created_unix_ms)},
      {"anchored",
       m.cursor_time_ns > 0 ? json(core::FormatTimeNs(m.cursor_time_ns)) : json(nullptr)},
      {"marker_ttl_seconds",
       m.marker_ttl_ns > 0 ? json(static_cast<double>(m.marker_ttl_ns) / 1e9) : json(nullptr)},
      {"current_by_window_until", CurrentByWindowUntil(m)
                                      ? json(core::FormatTimeNs(*CurrentByWindowUntil(m)))
                                      : json(nullptr)},
      {"exporter", m.exporter_id},
      {"entries", m.entry_count},
      {"chunks", m.chunks.size()},
      {"raw_bytes", m.raw_bytes()},
      {"compressed_bytes", m.compressed_bytes()},
      {"signed", m.is_signed},
      {"fold_digest",
       m.fold_digest.empty() ? json(nullptr) : json(artifact::HexEncode(m.fold_digest))},
      {"attests", m.attests.empty() ? json(nullptr) : json(m.attests)}};
  if (m.is_signed) j["signer"] = artifact::HexEncode(m.signer_public_key);
  if (with_chunks) {
    json chunks = json::array();
    for (const auto& c : m.chunks) {
      chunks.push_back({{"name", c.name},
                        {"entries", c.entry_count},
                        {"first_key", c.first_key},
                        {"last_key", c.last_key},
                        {"raw_bytes", c.raw_size},
                        {"compressed_bytes", c.compressed_size},
                        {"sha256", artifact::HexEncode(c.sha256)}});
    }
    j["chunk_list"] = chunks;
  }
  return j;
}

void PrintManifest(const ArtifactManifest& m, bool latest) {
  std::string scope;
  for (const auto& p : m.scope)
    scope += (scope.empty() ? "" : ", ") + (p.empty() ? "<whole bucket>" : p);
  const double ratio = m.compressed_bytes() > 0 ? static_cast<double>(m.raw_bytes()) /
                                                      static_cast<double>(m.compressed_bytes())
                                                : 0;
  std::printf("artifact:       %s%s\n", m.artifact_id.c_str(), latest ? "  (latest)" : "");
  std::printf("bucket:         %s\n", m.bucket.c_str());
  std::printf("stream created: %s\n", m.stream_created.c_str());
  std::printf("scope:          %s\n", m.has_scope ? scope.c_str() : "<none recorded>");
  std::printf("cursor:         %llu\n", static_cast<unsigned long long>(m.cursor));
  std::printf("created:        %s by %s\n", Utc(m.created_unix_ms).c_str(), m.exporter_id.c_str());
  std::printf("anchored:       %s (the server's time its cursor was current at)\n",
              core::FormatTimeNs(m.cursor_time_ns).c_str());
  if (const auto until = CurrentByWindowUntil(m)) {
    std::printf(
        "marker window:  limit markers live %.3g s: a restore takes it until %s, later only while "
        "the stream stores nothing after its cursor\n",
        static_cast<double>(m.marker_ttl_ns) / 1e9, core::FormatTimeNs(*until).c_str());
  } else {
    std::printf("marker window:  none (no limit markers): its age does not limit a restore\n");
  }
  std::printf("schema:         %u (readers >= %u)\n", m.schema_version, m.min_reader_version);
  if (!m.attests.empty()) {
    std::printf("re-attests:     %s (its chunks; no record changed up to this cursor)\n",
                m.attests.c_str());
  }
  std::printf("entries:        %llu in %zu chunk(s)\n",
              static_cast<unsigned long long>(m.entry_count), m.chunks.size());
  std::printf("size:           %llu bytes raw, %llu stored (%.2fx)\n",
              static_cast<unsigned long long>(m.raw_bytes()),
              static_cast<unsigned long long>(m.compressed_bytes()), ratio);
  std::printf("signed:         %s\n",
              m.is_signed ? ("yes, Ed25519 key " + artifact::HexEncode(m.signer_public_key)).c_str()
                          : "no");
  std::printf("fold digest:    %s\n", m.fold_digest.empty()
                                          ? "none (written before kvfold recorded one)"
                                          : artifact::HexEncode(m.fold_digest).c_str());
}

}  // namespace

StatusOr<std::string> LatestArtifactSummary(Transport& at, bool as_json) {
  auto id = LatestArtifactId(at);
  if (!id.ok()) return id.status();
  auto m = ReadArtifactManifest(at, *id, VerifyOptions{});
  if (!m.ok()) return m.status();
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  // Seconds since the anchor, by this machine's clock; none without one.
  const bool anchored = m->cursor_time_ns > 0;
  const double age = anchored ? static_cast<double>(now_ns - m->cursor_time_ns) / 1e9 : 0;
  const auto until = CurrentByWindowUntil(*m);
  if (as_json) {
    json j = {
        {"artifact", m->artifact_id},
        {"cursor", m->cursor},
        {"attests", m->attests.empty() ? json(nullptr) : json(m->attests)},
        {"anchored",
         m->cursor_time_ns > 0 ? json(core::FormatTimeNs(m->cursor_time_ns)) : json(nullptr)},
        {"anchor_age_seconds", anchored ? json(age) : json(nullptr)},
        {"marker_ttl_seconds",
         m->marker_ttl_ns > 0 ? json(static_cast<double>(m->marker_ttl_ns) / 1e9) : json(nullptr)},
        {"current_by_window_until", until ? json(core::FormatTimeNs(*until)) : json(nullptr)},
        {"inside_window", until ? json(now_ns < *until) : json(nullptr)}};
    return j.dump();
  }
  char age_text[64] = "unknown age";
  if (anchored) std::snprintf(age_text, sizeof(age_text), "%.1f s ago", age);
  std::string out = "latest artifact: " + m->artifact_id + " at cursor " +
                    std::to_string(m->cursor) +
                    (m->attests.empty() ? "" : " (re-attests " + m->attests + ")") + ", anchored " +
                    core::FormatTimeNs(m->cursor_time_ns) + " (" + age_text + ")\n";
  if (!until) {
    out +=
        "artifact window: none (no limit markers, or no anchor): its age does not limit a "
        "restore\n";
  } else if (now_ns < *until) {
    out += "artifact window: inside the marker window until " + core::FormatTimeNs(*until) +
           ": a restore takes it\n";
  } else {
    out += "artifact window: past the marker window since " + core::FormatTimeNs(*until) +
           ": a restore takes it only while the stream stores nothing after cursor " +
           std::to_string(m->cursor) + "\n";
  }
  return out;
}

namespace {

struct ExportFlags {
  ConnectOptions connect;
  TransportFlags transport;
  std::string fold;
  std::string to;
  std::string sign_key;
  std::vector<std::string> trusted;
  size_t keep = 0;
  std::string min_age = "1h";
  bool json = false;
};

int RunExport(ExportFlags& f) {
  KVFOLD_RETURN_IF_ERROR_EXIT("export", ResolveConnectFlags(&f.connect, false));
  KVFOLD_RETURN_IF_ERROR_EXIT("export", ResolveTransportFlags(&f.transport));
  auto min_age = ParseDuration(f.min_age, /*allow_zero=*/true);
  if (!min_age.ok()) return Report("export", min_age.status().WithContext("--min-age"));
  FoldOptions fo;
  fo.read_only = true;  // a consistent snapshot also works beside a running mirror
  // A scan needs no filters: memory that grows far less with the fold
  // (bench/run --scale: export_rss).
  fo.keep_table_filters_in_memory = false;
  auto fold = OpenRocksFold(f.fold, fo);
  if (!fold.ok()) return Report("export", fold.status());
  TransportOptions creating = f.transport.options;
  creating.create_if_missing = true;
  auto to = OpenTransport(f.to, f.connect, creating);
  if (!to.ok()) return Report("export", to.status());
  ExportOptions options;
  options.sign_key_file = f.sign_key;
  ProgressBar bar("export");
  options.progress = bar.Callback();
  uint64_t skipped = 0;
  std::string first_skipped;
  options.skipped_key = [&](std::string_view, const Status& why) {
    if (skipped++ == 0) first_skipped = why.message();
  };
  auto m = ExportArtifact(**fold, **to, options);
  bar.Finish();
  if (skipped > 0) {
    Log().Warn("left out " + std::to_string(skipped) +
               " key(s) an artifact cannot hold; first: " + first_skipped);
  }
  if (m.status().IsAlreadyExists()) {
    Log().Info("up to date, nothing newer to publish: " + m.status().message());
    return kExitOk;
  }
  if (!m.ok()) return Report("export", m.status());
  if (f.keep > 0) {
    std::vector<std::string> removed;
    Status pruned =
        PruneArtifacts(**to,
                       PruneOptions{.keep = f.keep,
                                    .min_age = *min_age,
                                    .verify = PruneTrustOfExporter(f.trusted, f.sign_key)},
                       &removed);
    if (!pruned.ok()) return Report("export", pruned);
    for (const auto& id : removed) Log().Info("pruned " + id);
  }
  if (f.json) {
    std::cout << ManifestJson(*m, false).dump() << "\n";
  } else {
    Log().Info("wrote artifact " + m->artifact_id + " (cursor " + std::to_string(m->cursor) + ", " +
               std::to_string(m->entry_count) + " entries) to " + (*to)->location() +
               (m->attests.empty() ? ""
                                   : ": a re-attestation of artifact " + m->attests +
                                         ", whose chunks it names (no record changed since)"));
  }
  return kExitOk;
}

struct SeedFlags {
  ConnectOptions connect;
  TransportFlags transport;
  std::string fold;
  std::string from;
  std::string artifact;
  std::string bucket;
  std::vector<std::string> trusted;
  bool require_signature = false;
  bool discard_unfinished = false;
};

// A seed refused before its first commit leaves the directory as it found
// it (absent or empty); one cut short later keeps the fold for the re-run.
void UndoCreation(std::unique_ptr<Fold> fold, const std::string& path, bool existed) {
  auto meta = fold->ReadMeta();
  if (!meta.ok() || meta->cursor || meta->entries != 0 || !meta->seeding.empty()) return;
  fold.reset();
  std::error_code ec;
  if (!existed) {
    std::filesystem::remove_all(path, ec);
    return;
  }
  for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
    std::filesystem::remove_all(e.path(), ec);
  }
}

int RunSeed(SeedFlags& f) {
  KVFOLD_RETURN_IF_ERROR_EXIT("seed", ResolveConnectFlags(&f.connect, false));
  KVFOLD_RETURN_IF_ERROR_EXIT("seed", ResolveTransportFlags(&f.transport));
  if (f.require_signature && f.trusted.empty()) {
    return Report("seed", Status::InvalidArgument("--require-signature needs --trusted-key"));
  }
  auto from = OpenTransport(f.from, f.connect, f.transport.options);
  if (!from.ok()) return Report("seed", from.status());
  std::error_code ec;
  const bool existed = std::filesystem::exists(f.fold, ec);
  const bool fresh = !ec && (!existed || std::filesystem::is_empty(f.fold, ec));
  // A seed writes each key once, in key order, chunk by chunk: small
  // memtables bound its memory (bench/run: seed_rss_big_vs_mid).
  FoldOptions fo;
  fo.memtable_bytes = size_t{4} << 20;
  // Nor do its ingested tables' filters stay in memory (seed_rss).
  fo.keep_table_filters_in_memory = false;
  auto fold = OpenRocksFold(f.fold, fo);
  if (!fold.ok()) return Report("seed", fold.status());
  SeedOptions options;
  options.verify.trusted_key_files = f.trusted;
  options.verify.require_signature = f.require_signature;
  options.artifact_id = f.artifact;
  options.expected_bucket = f.bucket;
  options.discard_unfinished = f.discard_unfinished;
  ProgressBar bar("seed");
  options.progress = bar.Callback();
  auto m = SeedFold(**fold, **from, options);
  bar.Finish();
  if (!m.ok()) {
    if (fresh) UndoCreation(std::move(*fold), f.fold, existed);
    return Report("seed", m.status());
  }
  Log().Info("seeded " + f.fold + " from artifact " + m->artifact_id + " (bucket " + m->bucket +
             ", cursor " + std::to_string(m->cursor) + ", " + std::to_string(m->entry_count) +
             " entries); `kvfold mirror` resumes from there");
  return kExitOk;
}

struct ArtifactsFlags {
  ConnectOptions connect;
  TransportFlags transport;
  std::string location;
  std::string artifact;
  std::vector<std::string> trusted;
  bool require_signature = false;
  bool json = false;
  size_t keep = 0;
  std::string min_age = "1h";
};

int RunList(const ArtifactsFlags& f) {
  auto at = OpenTransport(f.location, f.connect, f.transport.options);
  if (!at.ok()) return Report("artifacts list", at.status());
  std::vector<std::string> unreadable;
  auto all = ListArtifacts(**at, &unreadable);
  if (!all.ok()) return Report("artifacts list", all.status());
  auto pointer = (*at)->ReadPointer();
  const std::string latest = pointer.ok() && *pointer ? (**pointer).artifact_id : "";
  for (const auto& m : *all) {
    if (f.json) {
      json j = ManifestJson(m, false);
      j["latest"] = m.artifact_id == latest;
      std::cout << j.dump() << "\n";
    } else {
      std::cout << m.artifact_id << "\tcursor " << m.cursor << "\t" << m.entry_count << " entries\t"
                << m.compressed_bytes() << " bytes" << (m.artifact_id == latest ? "\tlatest" : "")
                << "\n";
    }
  }
  for (const auto& u : unreadable) Log().Warn("unreadable " + u);
  return kExitOk;
}

StatusOr<std::string> ChosenArtifact(Transport& at, const std::string& given) {
  if (!given.empty()) return given;
  return LatestArtifactId(at);
}

int RunInspect(const ArtifactsFlags& f) {
  auto at = OpenTransport(f.location, f.connect, f.transport.options);
  if (!at.ok()) return Report("artifacts inspect", at.status());
  auto id = ChosenArtifact(**at, f.artifact);
  if (!id.ok()) return Report("artifacts inspect", id.status());
  auto m = ReadArtifactManifest(**at, *id, VerifyOptions{});
  if (!m.ok()) return Report("artifacts inspect", m.status());
  auto pointer = (*at)->ReadPointer();
  const bool latest = pointer.ok() && *pointer && (**pointer).artifact_id == *id;
  if (f.json) {
    json j = ManifestJson(*m, true);
    j["latest"] = latest;
    std::cout << j.dump() << "\n";
  } else {
    PrintManifest(*m, latest);
  }
  return kExitOk;
}

int RunVerify(const ArtifactsFlags& f) {
  if (f.require_signature && f.trusted.empty()) {
    return Report("artifacts verify",
                  Status::InvalidArgument("--require-signature needs --trusted-key"));
  }
  auto at = OpenTransport(f.location, f.connect, f.transport.options);
  if (!at.ok()) return Report("artifacts verify", at.status());
  auto id = ChosenArtifact(**at, f.artifact);
  if (!id.ok()) return Report("artifacts verify", id.status());
  VerifyOptions options;
  options.trusted_key_files = f.trusted;
  options.require_signature = f.require_signature;
  ProgressBar bar("verify");
  Status s = VerifyArtifact(**at, *id, options, bar.Callback());
  bar.Finish();
  if (!s.ok()) return Report("artifacts verify", s);
  auto m = ReadArtifactManifest(**at, *id, options);
  if (!m.ok()) return Report("artifacts verify", m.status());
  std::cout << "artifact " << *id << " at " << (*at)->location() << ": OK ("
            << (m->fold_digest.empty()
                    ? "no fold digest: written before kvfold recorded one, so its chunks are "
                      "checked but a restore cannot prove it equals the exporter's fold"
                    : "its records match the fold digest")
            << ")\n";
  return kExitOk;
}

int RunPrune(const ArtifactsFlags& f) {
  auto at = OpenTransport(f.location, f.connect, f.transport.options);
  if (!at.ok()) return Report("artifacts prune", at.status());
  auto min_age = ParseDuration(f.min_age, /*allow_zero=*/true);
  if (!min_age.ok()) return Report("artifacts prune", min_age.status().WithContext("--min-age"));
  std::vector<std::string> removed;
  Status s = PruneArtifacts(**at,
                            PruneOptions{.keep = f.keep,
                                         .min_age = *min_age,
                                         .verify = VerifyOptions{.trusted_key_files = f.trusted}},
                            &removed);
  for (const auto& id : removed) std::cout << "removed " << id << "\n";
  return Report("artifacts prune", s);
}

}  // namespace

Runner AddExportCommand(CLI::App& app) {
  auto f = std::make_shared<ExportFlags>();
  CLI::App* cmd = app.add_subcommand("export",
                                     "Export a consistent snapshot of a fold as an artifact to "
                                     "dir:PATH, obj:BUCKET or s3://BUCKET/PREFIX "
                                     "(works on a stopped fold and beside a running mirror).");
  cmd->add_option("--fold", f->fold, "fold directory")->required();
  cmd->add_option("--to", f->to, "dir:PATH, obj:BUCKET (needs --server) or s3://BUCKET/PREFIX")
      ->required()
      ->check(kArtifactLocation);
  cmd->add_option("--sign-key", f->sign_key, "PEM Ed25519 private key to sign the manifest")
      ->check(CLI::ExistingFile);
  cmd->add_option("--keep", f->keep, "after exporting, prune to the newest K artifacts")
      ->check(kCount);
  cmd->add_option("--min-age", f->min_age,
                  "with --keep, never prune an artifact younger than this (a seed may be "
                  "reading it), e.g. 0s, 30m, 2h (default 1h)");
  cmd->add_option("--trusted-key", f->trusted,
                  "with --keep, prune only artifacts signed by this PEM Ed25519 public key or "
                  "--sign-key's; repeatable")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--json", f->json, "print the new manifest as JSON");
  AddConnectFlags(cmd, &f->connect);
  AddTransportFlags(cmd, &f->transport);
  return [f] { return RunExport(*f); };
}

Runner AddSeedCommand(CLI::App& app) {
  auto f = std::make_shared<SeedFlags>();
  CLI::App* cmd = app.add_subcommand(
      "seed",
      "Fill an empty fold from the newest artifact (verified first); `kvfold mirror` "
      "then resumes from the artifact's cursor. Re-run after a kill to finish.");
  cmd->add_option("--fold", f->fold, "empty fold directory")->required();
  cmd->add_option("--from", f->from, "dir:PATH, obj:BUCKET or s3://BUCKET/PREFIX")
      ->required()
      ->check(kArtifactLocation);
  cmd->add_option("--artifact", f->artifact, "seed from this artifact instead of the latest");
  cmd->add_option("--bucket", f->bucket, "refuse an artifact of any other bucket");
  cmd->add_option("--trusted-key", f->trusted,
                  "PEM Ed25519 public key to trust; repeatable; the artifact must be signed by one")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--require-signature", f->require_signature,
                "refuse artifacts not signed by a trusted key (implied by --trusted-key)");
  cmd->add_flag("--discard-unfinished", f->discard_unfinished,
                "discard an unfinished seed in --fold (e.g. its artifact was pruned) and seed "
                "from --artifact or the latest");
  AddConnectFlags(cmd, &f->connect);
  AddTransportFlags(cmd, &f->transport);
  return [f] { return RunSeed(*f); };
}

Runner AddArtifactsCommand(CLI::App& app) {
  auto f = std::make_shared<ArtifactsFlags>();
  CLI::App* cmd = app.add_subcommand("artifacts", "List, inspect, verify or prune artifacts.");
  cmd->require_subcommand(1);
  auto common = [&f](CLI::App* sub) {
    sub->add_option("location", f->location, "dir:PATH, obj:BUCKET or s3://BUCKET/PREFIX")
        ->required()
        ->check(kArtifactLocation);
    AddConnectFlags(sub, &f->connect);
    AddTransportFlags(sub, &f->transport);
  };
  CLI::App* list = cmd->add_subcommand("list", "One line per artifact, oldest cursor first.");
  common(list);
  list->add_flag("--json", f->json, "one JSON object per line");
  CLI::App* inspect =
      cmd->add_subcommand("inspect", "Show an artifact's manifest (default: the latest).");
  common(inspect);
  inspect->add_option("artifact", f->artifact, "artifact id");
  inspect->add_flag("--json", f->json, "one JSON object with the chunk list");
  CLI::App* verify = cmd->add_subcommand(
      "verify", "Check the manifest, the signature and every chunk; exit 1 naming any fault.");
  common(verify);
  verify->add_option("artifact", f->artifact, "artifact id (default: the latest)");
  verify
      ->add_option("--trusted-key", f->trusted,
                   "PEM Ed25519 public key to trust; repeatable; the artifact must be "
                   "signed by one")
      ->check(CLI::ExistingFile);
  verify->add_flag("--require-signature", f->require_signature,
                   "fail unless signed by a trusted key (implied by --trusted-key)");
  CLI::App* prune =
      cmd->add_subcommand("prune", "Remove all but the newest K artifacts, never the latest one.");
  common(prune);
  prune->add_option("--keep", f->keep, "how many to keep")->required()->check(CLI::PositiveNumber);
  prune->add_option("--min-age", f->min_age,
                    "never remove an artifact younger than this (a seed may be reading it), "
                    "e.g. 0s, 30m, 2h (default 1h)");
  prune
      ->add_option("--trusted-key", f->trusted,
                   "consider only artifacts signed by this PEM Ed25519 public key (unsigned "
                   "or foreign-signed ones are never removed); repeatable")
      ->check(CLI::ExistingFile);
  return [f, list, inspect, verify, prune] {
    KVFOLD_RETURN_IF_ERROR_EXIT("artifacts", ResolveConnectFlags(&f->connect, false));
    KVFOLD_RETURN_IF_ERROR_EXIT("artifacts", ResolveTransportFlags(&f->transport));
    if (list->parsed()) return RunList(*f);
    if (inspect->parsed()) return RunInspect(*f);
    if (verify->parsed()) return RunVerify(*f);
    if (prune->parsed()) return RunPrune(*f);
    return kExitUsage;
  };
}

}  // namespace kvfold::cli
