// Seed: fill an empty fold from an artifact.
//
// Into a fold with a loader (the RocksDB fold) and no entries: one pass
// verifies each chunk as it stages it, and the loader commits every entry
// under the seeding marker in one atomic step, so bad input or a kill
// leaves the fold as it was (a discarded unfinished seed goes in a commit
// right before that step: a kill between leaves an empty fold).
//
// Otherwise the whole artifact is verified before the first commit (bad
// input leaves the fold untouched); then each chunk is re-read,
// re-verified and committed under the seeding marker.
//
// Either way what was written is read back and checked against the
// manifest's fold digest before the last commit sets the cursor, bucket,
// scope and identity (and clears the marker): a kill before it leaves a
// fold the watcher refuses and a re-run finishes, and a fold that does not
// hold what the exporter's held never gets a cursor.

#include <utility>

#include "artifact/artifact_reader.h"
#include "artifact/fold_digest.h"
#include "core/mutation.h"
#include "kvfold/artifact.h"

namespace kvfold {
namespace {

// The way out of a seed whose artifact was pruned mid-read.
constexpr const char* kDiscardHint =
    "; to discard the unfinished seed and seed from the latest artifact instead, re-run with "
    "--discard-unfinished (SeedOptions::discard_unfinished)";

// One seed of one fold, pass by pass.
class Seed {
 public:
  Seed(Fold& fold, Transport& from, const SeedOptions& options)
      : fold_(fold), from_(from), options_(options) {}

  StatusOr<ArtifactManifest> Run();

 private:
  // The fold is empty, or holds an unfinished seed.
  Status CheckFold();
  // The artifact to seed from, checked: of the right bucket, restorable.
  StatusOr<ArtifactManifest> ChooseArtifact();
  // The one pass into an empty fold, through `loader`.
  Status Load(const ArtifactManifest& m, FoldLoader& loader);
  // Pass 2: each chunk re-read, re-verified and committed without a cursor.
  Status ApplyChunks(const ArtifactManifest& m);
  // Commits `commit`, a part of a chunk, under the seeding marker.
  Status CommitPart(const ArtifactManifest& m, FoldCommit* commit);
  // What the fold holds now against the manifest's fold digest.
  Status ReadBack(const ArtifactManifest& m);
  // The commit of the cursor, bucket, scope and identity.
  FoldCommit Final(const ArtifactManifest& m) const;

  Fold& fold_;
  Transport& from_;
  const SeedOptions& options_;
  FoldMeta meta_;
  bool untouched_ = false;   // nothing in the fold but perhaps bucket and scope
  bool unfinished_ = false;  // an unfinished seed
  bool discard_ = false;     // ... to be discarded by this one
  bool clear_ = false;       // the discard is still to be committed
  bool wrote_ = false;       // this seed committed something
  std::string id_;
};

Status Seed::CheckFold() {
  auto meta = fold_.ReadMeta();
  if (!meta.ok()) return meta.status();
  meta_ = std::move(meta).value();
  // Metadata alone does not make a fold non-empty: a first mirror whose
  // delivery broke before any message records bucket and scope, nothing else.
  untouched_ = !meta_.cursor && meta_.entries == 0 && meta_.seeding.empty();
  unfinished_ = meta_.unfinished_seed();
  if (!untouched_ && !unfinished_) {
    return Status::FailedPrecondition(
        "the fold is not empty (cursor " +
        (meta_.cursor ? std::to_string(*meta_.cursor) : std::string("<none>")) + ", " +
        std::to_string(meta_.live_keys) +
        " keys); seed only fills an empty fold: choose a new --fold directory");
  }
  discard_ = unfinished_ && options_.discard_unfinished;
  // The unfinished seed goes in the first commit of this one, atomically.
  clear_ = discard_;
  return Status::OK();
}

StatusOr<ArtifactManifest> Seed::ChooseArtifact() {
  id_ = options_.artifact_id;
  if (unfinished_ && !discard_) {
    if (!id_.empty() && id_ != meta_.seeding) {
      return Status::FailedPrecondition(
          "the fold holds an unfinished seed from artifact " + meta_.seeding + ", not " + id_ +
          "; re-run the seed without naming another artifact" + kDiscardHint);
    }
    id_ = meta_.seeding;
  }
  auto manifest = id_.empty() ? artifact::ReadLatestManifest(from_, options_.verify)
                              : ReadArtifactManifest(from_, id_, options_.verify);
  if (manifest.ok()) id_ = manifest->artifact_id;
  if (!manifest.ok()) {
    if (unfinished_ && !discard_ && manifest.status().IsNotFound()) {
      return Status::NotFound("the fold holds an unfinished seed from artifact " + id_ +
                              ", which is gone from " + from_.location() +
                              " (pruned while the seed read it?)" + kDiscardHint);
    }
    return manifest.status();
  }
  // A fold that already records its bucket takes only that bucket's artifacts.
  const std::string& expected_bucket =
      options_.expected_bucket.empty() ? meta_.bucket : options_.expected_bucket;
  if (!expected_bucket.empty() && manifest->bucket != expected_bucket) {
    return Status::FailedPrecondition("artifact " + id_ + " is of bucket " + manifest->bucket +
                                      ", not " + expected_bucket);
  }
  KVFOLD_RETURN_IF_ERROR(artifact::CheckRestorable(*manifest));
  return manifest;
}

Status Seed::CommitPart(const ArtifactManifest& m, FoldCommit* commit) {
  if (commit->entries.empty() && !commit->clear_entries) return Status::OK();
  commit->seeding = id_;
  if (KVFOLD_MUTANT("seed-cursor-every-commit")) commit->cursor = m.cursor;
  // Artifact keys are distinct and live: into an empty (or just cleared)
  // fold each is one more live entry, no read needed.
  if (untouched_ || discard_) {
    const auto n = static_cast<int64_t>(commit->entries.size());
    commit->counts = FoldCommit::CountChange{n, n};
  }
  KVFOLD_RETURN_IF_ERROR(fold_.Commit(*commit));
  wrote_ = true;
  *commit = FoldCommit();
  return Status::OK();
}

Status Seed::ApplyChunks(const ArtifactManifest& m) {
  ArtifactProgress progress;
  progress.entries_total = m.entry_count;
  std::string previous;
  for (size_t i = 0; i < m.chunks.size(); ++i) {
    // Parts of a chunk commit as they fill (the reader verified the whole
    // chunk before the first record): small commits keep memory flat.
    FoldCommit commit;
    commit.clear_entries = std::exchange(clear_, false);
    uint64_t stored = 0;
    Status write_error;
    Status read = artifact::ReadChunk(
        from_, m, i, &previous,
        [&](std::string_view key, uint64_t rev, std::string_view value, int64_t expires_ns) {
          commit.entries.emplace(std::string(key),
                                 Entry{rev, false, std::string(value), expires_ns});
          if (commit.entries.size() < 8192) return Status::OK();
          write_error = CommitPart(m, &commit);
          return write_error;
        },
        &stored);
    if (!write_error.ok()) return write_error;
    if (!read.ok()) {
      // Verified a moment ago: the artifact changed under the seed (most
      // likely pruned), and the fold keeps the chunks applied so far.
      if (!wrote_ && !discard_ && !unfinished_) return read;  // nothing written yet
      return read.WithContext("artifact " + id_ + " changed while seeding from it; the fold " +
                              "holds an unfinished seed" + kDiscardHint);
    }
    KVFOLD_RETURN_IF_ERROR(CommitPart(m, &commit));
    progress.entries_done += m.chunks[i].entry_count;
    progress.bytes_done += stored;
    if (options_.progress) options_.progress(progress);
  }
  return Status::OK();
}

Status Seed::Load(const ArtifactManifest& m, FoldLoader& loader) {
  KVFOLD_RETURN_IF_ERROR(artifact::ReadAllChunks(
      from_, m,
      [&loader](std::string_view key, uint64_t rev, std::string_view value, int64_t expires_ns) {
        return loader.Add(key, Entry{rev, false, std::string(value), expires_ns});
      },
      options_.progress));
  // The discarded seed goes once this one verified whole. A kill between
  // the two leaves an empty fold, which a re-run seeds anew.
  if (std::exchange(clear_, false)) {
    FoldCommit clear;
    clear.clear_entries = true;
    clear.seeding = "";
    KVFOLD_RETURN_IF_ERROR(fold_.Commit(clear));
  }
  FoldCommit staged;
  staged.seeding = id_;
  KVFOLD_RETURN_IF_ERROR(loader.Finish(staged));
  KVFOLD_RETURN_IF_ERROR(ReadBack(m));
  return fold_.Commit(Final(m));
}

Status Seed::ReadBack(const ArtifactManifest& m) {
  if (m.fold_digest.empty() || KVFOLD_MUTANT("seed-skip-readback")) return Status::OK();
  // Everything in the fold is this seed's: it was empty, or cleared.
  auto digest = artifact::DigestOfFold(fold_, {""}, m.cursor);
  if (!digest.ok()) return digest.status();
  return artifact::CheckFoldDigest(m.fold_digest, *digest,
                                   "the fold seeded from artifact " + id_ + ", read back,")
      .WithContext(
          "the fold holds an unfinished seed that is not the artifact's (a fault of "
          "this disk or of kvfold); it gets no cursor" +
          std::string(kDiscardHint));
}

FoldCommit Seed::Final(const ArtifactManifest& m) const {
  FoldCommit last;
  last.clear_entries = clear_;  // an artifact without chunks
  last.cursor = m.cursor;
  if (!KVFOLD_MUTANT("seed-drop-anchor")) last.cursor_time_ns = m.cursor_time_ns;
  if (m.marker_ttl_ns > 0) last.marker_ttl_ns = m.marker_ttl_ns;
  last.bucket = m.bucket;
  last.scope = m.scope;
  last.stream_created = m.stream_created;
  last.seeding = "";
  if (m.eviction_observed) {  // the memo is permanent
    last.eviction_observed = true;
    last.eviction_cause = m.eviction_cause;
  }
  return last;
}

StatusOr<ArtifactManifest> Seed::Run() {
  KVFOLD_RETURN_IF_ERROR(CheckFold());
  auto manifest = ChooseArtifact();
  if (!manifest.ok()) return manifest.status();
  if (untouched_ || discard_) {
    auto loader = fold_.NewLoader();
    if (!loader.ok()) return loader.status();
    if (*loader) {
      KVFOLD_RETURN_IF_ERROR(Load(*manifest, **loader));
      return manifest;
    }
  }
  // Pass 1: everything verifies, or nothing is written.
  if (!KVFOLD_MUTANT("seed-skip-verify-pass")) {
    KVFOLD_RETURN_IF_ERROR(artifact::ReadAllChunks(
        from_, *manifest,
        [](std::string_view, uint64_t, std::string_view, int64_t) { return Status::OK(); }, {}));
  }
  KVFOLD_RETURN_IF_ERROR(ApplyChunks(*manifest));
  if (std::exchange(clear_, false)) {
    // An artifact without chunks: the discarded seed goes before the
    // read-back, which must see only this seed's entries.
    FoldCommit clear;
    clear.clear_entries = true;
    clear.seeding = id_;
    KVFOLD_RETURN_IF_ERROR(fold_.Commit(clear));
  }
  KVFOLD_RETURN_IF_ERROR(ReadBack(*manifest));
  KVFOLD_RETURN_IF_ERROR(fold_.Commit(Final(*manifest)));
  return manifest;
}

}  // namespace

StatusOr<ArtifactManifest> SeedFold(Fold& fold, Transport& from, const SeedOptions& options) {
  return Seed(fold, from, options).Run();
}

}  // namespace kvfold
