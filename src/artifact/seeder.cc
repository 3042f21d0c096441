// Seed: fill an empty fold from an artifact. The whole artifact is verified
// before the first commit (bad input leaves the fold untouched); then each
// chunk is re-read, re-verified and committed without a cursor, and the
// cursor, bucket, scope and identity land only in the final commit, so a
// kill mid-seed leaves a fold the watcher refuses and a re-run finishes.

#include <utility>

#include "artifact/artifact_reader.h"
#include "core/mutation.h"
#include "kvfold/artifact.h"

namespace kvfold {

StatusOr<ArtifactManifest> SeedFold(Fold& fold, Transport& from, const SeedOptions& options) {
  auto meta = fold.ReadMeta();
  if (!meta.ok()) return meta.status();
  // Metadata alone does not make a fold non-empty: a first mirror whose
  // delivery broke before any message records bucket and scope, nothing else.
  const bool untouched = !meta->cursor && meta->entries == 0 && meta->seeding.empty();
  const bool unfinished = !meta->cursor && !meta->seeding.empty();
  if (!untouched && !unfinished) {
    return Status::FailedPrecondition(
        "the fold is not empty (cursor " +
        (meta->cursor ? std::to_string(*meta->cursor) : std::string("<none>")) + ", " +
        std::to_string(meta->live_keys) +
        " keys); seed only fills an empty fold: choose a new --fold directory");
  }
  std::string id = options.artifact_id;
  // The way out of a seed whose artifact was pruned mid-read.
  const std::string discard_hint =
      "; to discard the unfinished seed and seed from the latest artifact instead, re-run with "
      "--discard-unfinished (SeedOptions::discard_unfinished)";
  const bool discard = unfinished && options.discard_unfinished;
  if (unfinished && !discard) {
    if (!id.empty() && id != meta->seeding) {
      return Status::FailedPrecondition("the fold holds an unfinished seed from artifact " +
                                        meta->seeding + ", not " + id +
                                        "; re-run the seed without naming another artifact" +
                                        discard_hint);
    }
    id = meta->seeding;
  }
  if (id.empty()) {
    auto latest = LatestArtifactId(from);
    if (!latest.ok()) return latest.status();
    id = *latest;
  }
  auto manifest = ReadArtifactManifest(from, id, options.verify);
  if (!manifest.ok()) {
    if (unfinished && !discard && manifest.status().IsNotFound()) {
      return Status::NotFound("the fold holds an unfinished seed from artifact " + id +
                              ", which is gone from " + from.location() +
                              " (pruned while the seed read it?)" + discard_hint);
    }
    return manifest.status();
  }
  const ArtifactManifest& m = *manifest;
  // A fold that already records its bucket takes only that bucket's artifacts.
  const std::string& expected_bucket =
      options.expected_bucket.empty() ? meta->bucket : options.expected_bucket;
  if (!expected_bucket.empty() && m.bucket != expected_bucket) {
    return Status::FailedPrecondition("artifact " + id + " is of bucket " + m.bucket + ", not " +
                                      expected_bucket);
  }
  KVFOLD_RETURN_IF_ERROR(artifact::CheckRestorable(m));
  // Pass 1: everything verifies, or nothing is written.
  if (!KVFOLD_MUTANT("seed-skip-verify-pass")) {
    KVFOLD_RETURN_IF_ERROR(artifact::ReadAllChunks(
        from, m, [](std::string_view, uint64_t, std::string_view) { return Status::OK(); }, {}));
  }

  // Pass 2: apply chunk by chunk under the seeding marker.
  ArtifactProgress progress;
  progress.entries_total = m.entry_count;
  std::string previous;
  // The unfinished seed goes in the first commit of this one, atomically.
  bool clear = discard;
  bool wrote = false;
  for (size_t i = 0; i < m.chunks.size(); ++i) {
    FoldCommit commit;
    // Commits a part of the chunk (the reader verified the whole chunk
    // before the first record): small commits keep the seed's memory flat.
    auto commit_part = [&]() -> Status {
      if (commit.entries.empty() && !commit.clear_entries) return Status::OK();
      commit.seeding = id;
      if (KVFOLD_MUTANT("seed-cursor-every-commit")) commit.cursor = m.cursor;
      // Artifact keys are distinct and live: into an empty (or just
      // cleared) fold each is one more live entry, no read needed.
      if (untouched || discard) {
        const auto n = static_cast<int64_t>(commit.entries.size());
        commit.counts = FoldCommit::CountChange{n, n};
      }
      KVFOLD_RETURN_IF_ERROR(fold.Commit(commit));
      wrote = true;
      commit = FoldCommit();
      return Status::OK();
    };
    commit.clear_entries = std::exchange(clear, false);
    uint64_t stored = 0;
    Status write_error;
    Status read = artifact::ReadChunk(
        from, m, i, &previous,
        [&](std::string_view key, uint64_t rev, std::string_view value) {
          commit.entries.emplace(std::string(key), Entry{rev, false, std::string(value)});
          if (commit.entries.size() < 8192) return Status::OK();
          write_error = commit_part();
          return write_error;
        },
        &stored);
    if (!write_error.ok()) return write_error;
    if (!read.ok()) {
      // Verified a moment ago: the artifact changed under the seed (most
      // likely pruned), and the fold keeps the chunks applied so far.
      if (!wrote && !discard && !unfinished) return read;  // nothing written yet
      return read.WithContext("artifact " + id + " changed while seeding from it; the fold " +
                              "holds an unfinished seed" + discard_hint);
    }
    KVFOLD_RETURN_IF_ERROR(commit_part());
    progress.entries_done += m.chunks[i].entry_count;
    progress.bytes_done += stored;
    if (options.progress) options.progress(progress);
  }
  FoldCommit last;
  last.clear_entries = clear;  // an artifact without chunks
  last.cursor = m.cursor;
  last.cursor_time_ns = m.cursor_time_ns;
  if (m.marker_ttl_ns > 0) last.marker_ttl_ns = m.marker_ttl_ns;
  last.bucket = m.bucket;
  last.scope = m.scope;
  last.stream_created = m.stream_created;
  last.seeding = "";
  if (m.eviction_observed) last.eviction_observed = true;  // the memo is permanent
  KVFOLD_RETURN_IF_ERROR(fold.Commit(last));
  return manifest;
}

}  // namespace kvfold
