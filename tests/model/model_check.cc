// The exhaustive model checker of the repair protocol (SPEC §2–§5): a
// bounded breadth-first search over the deduplicated states of a small
// world, a history-1 KV bucket that loses messages, an exporter that keeps
// up, and one node that watches, crashes, restarts and repairs. A third
// world is a bucket with per-message TTL and limit markers (nats-server
// 2.11+): puts expire into markers, markers expire from the middle of the
// stream, a clock ticks, and the node keeps its positions' anchors and
// checks the marker window (core::MarkerWindowNs, InsideMarkerWindow) at a
// session's start, on a jump in what it is delivered, on each probe, and
// in CheckRestore; an extra oracle checks that the fold's cursor anchor is
// never later than a message after the cursor, except those a relist's
// listing or a state sync stands for (both anchor at the time they began
// reading and cover everything the stream held then). Its limits: at 1 s
// ticks a window anywhere in (1 s, 2 s] behaves alike, so the margin's size
// is not checked here (MarkerWindowTest is); with the default 3 ticks only
// a marker written at the first tick can expire (--ticks 4 for more).
//
//   kvfold_model [--deep] [--keys N] [--seqs N] [--crashes N] [--transients N] [--ticks N]
//
// The model supplies only the world; every decision the node takes comes
// from the product's own rules (core::CheckWindow, ClassifyRetention,
// ChooseRepair, CheckRestore, RestoreKey, RelistKey, FoldMessage with
// PendingBatch, NothingInScopeToCome, CountChangeOf, the repair's
// repair::LiveInBucket over a BucketSource of the model's stream, and the
// watch's own FloorGuard, held in each state: received, verified, the relist
// floor, their anchors, a lost anchor), so a wrong rule shows up as a
// violated oracle, not as a wrong model (floor-jump-verified, planted in
// FloorGuard::Receive, is caught here). What it still copies by hand, and
// why: the order in which WatchLoop calls them (a session's start, a
// delivery, a floor check, a probe, a repair's outcome), since the watch
// loop's I/O cannot run inside a state of the search; each copy names the
// WatchLoop function it follows. The marker TTL is constant here (MarkerTtl's
// changes are the schedule sim's ttl-marker-changes scenario), and a probe is
// one atomic step (the race between its stream read and its store search is
// WatcherSimTest's, through SimBucket::before_request).
//
// Oracles (SPEC §2), on every transition: the cursor never moves backward
// nor past the stream; a key's revision never goes backward; no entry is
// written that no message made; no phantom delete (a delete must report a
// state the key really was in at or after the revision it carries); the
// stated count change is the fold's; a refused repair has not written. On
// every state: fold + retained tail after the cursor = truth whenever that
// tail is complete, and a caught-up fold (cursor = last sequence, no repair
// due) is the truth.
//
// Not modelled: a recreated stream, scopes narrower than the bucket,
// policy none, history > 1, a delete marker purged from the middle of the
// stream (first_seq cannot see it; the periodic reconcile's case), torn or
// applied-but-failed commits (kvfold_sim's), and liveness (the search checks
// safety only: a node that refuses forever violates nothing here).
//
// Prints exactly one line, `model: N unique states, M transitions, D
// violations`, and exits 1 when D > 0, after the first violations with the
// actions that reach them on stderr. The default tier (2 keys, 4 sequences,
// 1 crash, 2 transient failures) is sized for CI; --deep raises it to 5
// sequences for manual runs.

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/count_change.h"
#include "core/marker_window.h"
#include "core/mutation.h"
#include "core/pending_batch.h"
#include "core/repair_rules.h"
#include "core/window.h"
#include "kvfold/retention.h"
#include "repair/listed_keys.h"
#include "watch/floor_guard.h"

namespace kvfold::model {
namespace {

using core::RepairAction;
using core::RepairCause;

constexpr int kMaxKeys = 3;
constexpr int kMaxSeqs = 8;  // the retained set is a byte
const char* const kKeys[kMaxKeys] = {"a", "b", "c"};
const std::string kBucket = "orders";
const std::string kCreated = "2024-05-01T00:00:00Z";  // one stream: never recreated here

struct Bounds {
  int keys = 2;
  int seqs = 4;   // stream sequences (writes and deletes) at most
  int ticks = 3;  // server clock ticks (1 s each), marker buckets only
  int crashes = 1;
  int transients = 2;
};

// How the bucket loses messages, besides a key's own overwrite (history 1
// removes the key's previous message in both).
enum class Flavour : uint8_t {
  // No limits: current values stay. Only a delete marker at the head may be
  // purged (a purge of markers in the middle is invisible to first_seq;
  // that case is the periodic reconcile's, not the window check's).
  kKeeps,
  // discard=old under max_msgs: the oldest message goes, whatever it is.
  kEvicts,
  // Per-message TTL with limit markers (nats-server 2.11+): a key's put
  // may expire at any time, which writes a limit marker (a delete) and
  // removes the put; the marker itself expires kMarkerTtlTicks later, from
  // the middle of the stream, with no trace. Time is in ticks of 1 s.
  kMarkers,
};

constexpr int kMarkerTtlTicks = 2;
constexpr int64_t kTickNs = 1000000000;

struct Message {
  uint8_t key = 0;
  bool put = true;      // else a delete marker
  bool marker = false;  // a limit marker (kMarkers): it expires
  uint8_t time = 1;     // the tick it was stored at (>= 1)
};

enum class Mode : uint8_t {
  kDown,      // not running: not started yet, crashed, or refused
  kWatching,  // a session delivers from the stream
  kRepair,    // a repair is due: everything received is flushed first
  kRelist,    // a relist runs (see Phase)
  kRestore,   // a restore runs (see Phase)
};

enum class Phase : uint8_t {
  kNone,
  kListing,  // the key listing began (listing_revision read) and runs
  kWalk,     // key by key, in key order; `step` is the next key
};

// Everything that tells two situations apart, and nothing else: the
// encoding of this is the search's deduplication key.
struct State {
  // The world.
  Flavour flavour = Flavour::kKeeps;
  ExpiryRepair policy = ExpiryRepair::kAuto;
  std::vector<Message> log;  // the message of sequence s is log[s - 1]
  uint8_t retained = 0;      // bit s - 1: the stream still holds sequence s
  // The cursor of the newest artifact a restore has read; 0 when none has.
  // Exports are chosen lazily, when a restore reads the newest artifact:
  // the exporter keeps up, so any cursor from this one (the pointer only
  // moves forward) to the stream's last sequence may be the newest then.
  // This keeps the export's timing out of the state until it matters.
  uint8_t artifact = 0;
  uint8_t now = 1;  // the server's clock, in ticks (kMarkers only moves it)

  // The node's fold: what a crash leaves.
  std::array<std::optional<Entry>, kMaxKeys> fold;
  std::optional<uint64_t> cursor;
  uint8_t cursor_time = 0;  // the cursor's anchor in ticks; 0 unknown
  // A ghost, for the anchor oracle only: the listing revision of the last
  // relist that anchored the cursor at its start (RunRelist with
  // anchor_cursor). The listing stands for every message up to it, so the
  // anchor's promise covers only the messages after it. 0: none.
  uint8_t listing_covered = 0;
  bool memo = false;  // the eviction memo

  // The node's memory: what a crash loses.
  Mode mode = Mode::kDown;
  RepairCause cause = RepairCause::kExpired;
  core::PendingBatch pending;
  // The batch handed to the background committer, not collected yet.
  std::optional<FoldCommit> in_flight;
  // The product's own floor guard: received, verified, the relist floor
  // and their anchors (in ns; whole ticks here).
  FloorGuard guard;
  uint64_t deliver_from = 0;
  bool unanchored = false;
  // The repair that runs.
  Phase phase = Phase::kNone;
  uint8_t step = 0;
  uint8_t listed = 0;  // bit k: the listing named key k
  uint64_t listing_revision = 0;
  uint8_t listing_time = 0;    // the server's clock when the relist's listing began
  uint8_t restore_cursor = 0;  // the artifact being restored
  bool restore_evicted = false;
  uint8_t repair_writes = 0;  // commits this repair made

  // Budgets spent.
  uint8_t crashes = 0;
  uint8_t transients = 0;
};

// ---- The world ---------------------------------------------------------------

uint64_t LastSeq(const State& s) { return s.log.size(); }

bool Retained(const State& s, uint64_t seq) { return (s.retained >> (seq - 1)) & 1; }

uint64_t FirstSeq(const State& s) {
  for (uint64_t seq = 1; seq <= LastSeq(s); ++seq) {
    if (Retained(s, seq)) return seq;
  }
  return LastSeq(s) + 1;
}

std::string Value(uint64_t seq) { return "v" + std::to_string(seq); }

StreamState Stream(const State& s) {
  StreamState st;
  st.created = kCreated;
  st.first_seq = FirstSeq(s);
  st.last_seq = LastSeq(s);
  st.messages = std::popcount(s.retained);
  st.max_msgs = s.flavour == Flavour::kEvicts ? 1000 : -1;
  st.history = 1;
  if (s.flavour == Flavour::kMarkers) {
    st.allow_msg_ttl = true;
    st.marker_ttl_ns = kMarkerTtlTicks * kTickNs;
  }
  st.server_time_ns = s.now * kTickNs;
  return st;
}

int KeyIndex(std::string_view key) {
  for (int k = 0; k < kMaxKeys; ++k) {
    if (key == kKeys[k]) return k;
  }
  return -1;
}

// The key's live entry in the truth as of sequence `at`: every write minus
// every real delete, whatever retention removed since.
std::optional<Entry> TruthAt(const State& s, int key, uint64_t at) {
  for (uint64_t seq = std::min(at, LastSeq(s)); seq >= 1; --seq) {
    const Message& m = s.log[seq - 1];
    if (m.key != key) continue;
    if (!m.put) return std::nullopt;
    return Entry{seq, false, Value(seq)};
  }
  return std::nullopt;
}

std::optional<uint64_t> LastRetainedOf(const State& s, int key) {
  for (uint64_t seq = LastSeq(s); seq >= 1; --seq) {
    if (Retained(s, seq) && s.log[seq - 1].key == key) return seq;
  }
  return std::nullopt;
}

// The model's stream, as the repair's own code reads it.
class WorldSource final : public BucketSource {
 public:
  explicit WorldSource(const State& s) : s_(s) {}
  const std::string& bucket() const override { return kBucket; }
  StatusOr<StreamState> ReadStream() override { return Stream(s_); }
  StatusOr<std::unique_ptr<Delivery>> Open(const DeliveryStart&, const Scope&) override {
    return Status::Internal("the model delivers by itself");
  }
  StatusOr<std::optional<uint64_t>> FirstRetainedInScope(const Scope& scope,
                                                         uint64_t from_seq) override {
    for (uint64_t seq = std::max<uint64_t>(from_seq, 1); seq <= LastSeq(s_); ++seq) {
      if (Retained(s_, seq) && scope.Contains(kKeys[s_.log[seq - 1].key])) {
        return std::optional<uint64_t>(seq);
      }
    }
    return std::optional<uint64_t>();
  }
  StatusOr<std::optional<BucketMessage>> LastOfKey(const std::string& key) override {
    auto seq = LastRetainedOf(s_, KeyIndex(key));
    if (!seq) return std::optional<BucketMessage>();
    BucketMessage m;
    m.key = key;
    m.seq = *seq;
    m.op = s_.log[*seq - 1].put ? Op::kPut : Op::kDelete;
    return std::optional<BucketMessage>(m);
  }
  Status ListKeys(const Scope&, const std::function<Status(std::string_view, uint64_t)>&,
                  uint64_t*) override {
    return Status::Internal("the model lists in two steps (see ListingEnds)");
  }

 private:
  const State& s_;
};

// ---- Encoding (the deduplication key) --------------------------------------

void PutEntry(std::string* out, const std::optional<Entry>& e) {
  if (!e) {
    out->push_back('\xff');
    return;
  }
  out->push_back(static_cast<char>(e->revision));
  out->push_back(e->deleted ? 1 : 0);
  out->append(e->value);
  out->push_back('\0');
}

void PutOptional(std::string* out, const std::optional<uint64_t>& v) {
  out->push_back(v ? static_cast<char>(*v) : '\xff');
}

std::string Encode(const State& s) {
  std::string out;
  out.reserve(64);
  out.push_back(static_cast<char>(s.flavour));
  out.push_back(static_cast<char>(s.policy));
  for (const Message& m : s.log) {
    out.push_back(static_cast<char>(m.key * 4 + (m.put ? 1 : 0) + (m.marker ? 2 : 0)));
    if (s.flavour == Flavour::kMarkers) out.push_back(static_cast<char>(m.time));
  }
  out.push_back('|');
  out.push_back(static_cast<char>(s.now));
  out.push_back(static_cast<char>(s.cursor_time));
  out.push_back(static_cast<char>(s.listing_covered));
  out.push_back(static_cast<char>(s.retained));
  out.push_back(static_cast<char>(s.artifact));
  for (const auto& e : s.fold) PutEntry(&out, e);
  PutOptional(&out, s.cursor);
  out.push_back(s.memo);
  out.push_back(static_cast<char>(s.mode));
  if (s.mode == Mode::kDown) {
    // Memory is reset on the way down, so nothing else can differ.
  } else {
    out.push_back(static_cast<char>(s.cause));
    const FoldCommit pending = s.pending.ToCommit();
    for (const auto& [key, e] : pending.entries) {
      out.append(key);
      PutEntry(&out, e);
    }
    out.push_back('|');
    PutOptional(&out, pending.cursor);
    out.push_back(static_cast<char>(pending.cursor_time_ns.value_or(0) / kTickNs));
    if (s.in_flight) {
      for (const auto& [key, e] : s.in_flight->entries) {
        out.append(key);
        PutEntry(&out, e);
      }
      PutOptional(&out, s.in_flight->cursor);
      out.push_back(static_cast<char>(s.in_flight->cursor_time_ns.value_or(0) / kTickNs));
    }
    out.push_back('|');
    PutOptional(&out, s.guard.received());
    for (uint64_t v : {s.guard.verified(), s.guard.relist_floor(), s.deliver_from}) {
      out.push_back(static_cast<char>(v));
    }
    out.push_back(static_cast<char>(s.guard.received_anchor() / kTickNs));
    out.push_back(static_cast<char>(s.guard.verified_anchor() / kTickNs));
    out.push_back(s.guard.anchor_lost());
    out.push_back(s.unanchored);
    out.push_back(static_cast<char>(s.phase));
    out.push_back(static_cast<char>(s.step));
    out.push_back(static_cast<char>(s.listed));
    out.push_back(static_cast<char>(s.listing_revision));
    out.push_back(static_cast<char>(s.listing_time));
    out.push_back(static_cast<char>(s.restore_cursor));
    out.push_back(s.restore_evicted);
    out.push_back(static_cast<char>(s.repair_writes));
  }
  out.push_back(static_cast<char>(s.crashes));
  out.push_back(static_cast<char>(s.transients));
  return out;
}

// ---- The node ---------------------------------------------------------------

// One successor of a state: the action's name, the state it leads to, and
// the invariant it broke ("" when none).
struct Step {
  std::string label;
  State next;
  std::string violation;
};

class Node {
 public:
  Node(const Bounds& bounds, std::vector<Step>* out) : bounds_(bounds), out_(out) {}

  void Successors(const State& s);

 private:
  void Emit(std::string label, State next, std::string violation = "") {
    out_->push_back(Step{std::move(label), std::move(next), std::move(violation)});
  }

  // A repair's commit. A failure is retried in place
  // (ChangeWriter::CommitWithRetry) and applies nothing, so the state it
  // leaves is the state before it with less failure budget: everything
  // reachable from there is reachable from here, and the search skips it.
  void EmitCommit(const std::string& label, const State& s, const FoldCommit& commit,
                  const std::function<std::string(State&)>& after);

  void World(const State& s);
  void MarkerWorld(const State& s);
  void Watch(const State& s);
  void Commit(const State& s);
  void Repair(const State& s);

  const Bounds& bounds_;
  std::vector<Step>* out_;
};

// A crash or a refusal: the process is gone, only the fold stays. The
// memory is reset to one canonical value, so that down states deduplicate.
void ResetMemory(State& s) {
  const State blank;
  s.mode = Mode::kDown;
  s.cause = blank.cause;
  s.pending = core::PendingBatch();
  s.in_flight.reset();
  s.guard = FloorGuard();
  s.deliver_from = 0;
  s.unanchored = false;
  s.phase = Phase::kNone;
  s.step = 0;
  s.listed = 0;
  s.listing_revision = 0;
  s.listing_time = 0;
  s.restore_cursor = 0;
  s.restore_evicted = false;
  s.repair_writes = 0;
}

// What the watcher's memory holds after reading its fold (WatchLoop::Prepare).
void Prepare(State& s) {
  ResetMemory(s);
  s.guard.ResetTo(s.cursor, s.cursor_time * kTickNs, /*new_stream=*/false);
  bool entries = false;
  for (const auto& e : s.fold) entries = entries || e.has_value();
  s.unanchored = !s.cursor && entries;
}

void NoteRetention(State& s, const StreamState& st) {
  // The memo is a fact about the bucket, and first_seq never comes back
  // down here, so making it durable at once (the watcher carries it in its
  // next commit) observes nothing the next read would not.
  if (!s.memo && ClassifyRetention(st, /*eviction_observed=*/true).has_evicted) s.memo = true;
}

// The pending batch's cursor follows the guard's (WatchLoop::AdvanceCursor).
void AdvanceCursor(State& s) {
  if (const auto cursor = s.guard.Cursor()) s.pending.AdvanceTo(*cursor, s.guard.CursorAnchor());
}

// The marker window in ns, or nullopt when the bucket writes no markers.
std::optional<int64_t> Window(const State& s) { return core::MarkerWindowNs(Stream(s)); }

// Whether a reader anchored at received may still read on now.
bool ReceivedInsideWindow(const State& s) {
  const auto w = Window(s);
  return !w || s.guard.ReceivedInsideWindow(s.now * kTickNs, *w);
}

void EnterRepair(State& s, RepairCause cause) {
  s.mode = Mode::kRepair;
  s.cause = cause;
  s.phase = Phase::kNone;
}

// A session's start (WatchLoop::CheckStart): the window check, then what a
// cursor-less start needs. Returns a violation, "" when none.
std::string StartSession(State& s) {
  const StreamState st = Stream(s);
  NoteRetention(s, st);
  std::optional<uint64_t> frontier;
  if (s.guard.received()) frontier = s.guard.Frontier(st);
  std::string why;
  switch (core::CheckWindow(kBucket, st, frontier, kCreated, &why)) {
    case core::WindowFault::kRecreated:
      return "the window check took the one stream for a recreated one: " + why;
    case core::WindowFault::kExpired:
      EnterRepair(s, RepairCause::kExpired);
      return "";
    case core::WindowFault::kNone:
      break;
  }
  if (const auto received = s.guard.received()) {
    // A stream that stored nothing after the position is current by
    // itself; else the marker window by the anchor.
    if (LastSeq(s) <= *received) s.guard.ReanchorReceived(s.now * kTickNs);
    if (!ReceivedInsideWindow(s)) {
      EnterRepair(s, RepairCause::kExpired);
      return "";
    }
  }
  s.mode = Mode::kWatching;
  s.cause = State().cause;  // canonical: no repair is due
  if (const auto received = s.guard.received()) {
    s.deliver_from = *received + 1;
    return "";
  }
  if (s.unanchored) {
    EnterRepair(s, RepairCause::kUnanchored);
    return "";
  }
  if (!ClassifyRetention(st, s.memo).listing_is_truth) {
    EnterRepair(s, RepairCause::kFreshStart);
    return "";
  }
  // A state sync: on history 1, a sequential read from first_seq; what
  // retention removed before it is superseded.
  // It anchors at the reply's time, and stands for every message up to the
  // stream's last one then, as a relist's listing does (the anchor oracle's
  // ghost).
  s.guard.StartStateSync(st.first_seq, s.now * kTickNs, /*forget_received=*/false);
  s.listing_covered = std::max(s.listing_covered, static_cast<uint8_t>(LastSeq(s)));
  s.deliver_from = std::max<uint64_t>(st.first_seq, 1);
  return "";
}

// WatchLoop::CheckFloor: false when it tripped (a repair is due).
bool CheckFloor(State& s) {
  const StreamState st = Stream(s);
  NoteRetention(s, st);
  std::string why;
  if (core::CheckWindow(kBucket, st, s.guard.Frontier(st), kCreated, &why) !=
      core::WindowFault::kNone) {
    EnterRepair(s, RepairCause::kFloorTrip);
    return false;
  }
  s.guard.VerifyReceived();
  AdvanceCursor(s);
  return true;
}

// The manifest of the artifact at `cursor`: the exporter's fold (the truth)
// at it. Its eviction memo is whether the bucket has evicted now: the memo
// at export could only be false where this is true, and then the node's own
// reading of the bucket records the memo anyway.
ArtifactManifest Manifest(const State& s, uint8_t cursor) {
  const bool memo = ClassifyRetention(Stream(s), true).has_evicted;
  ArtifactManifest m;
  m.artifact_id = "artifact@" + std::to_string(cursor);
  m.schema_version = 1;
  m.bucket = kBucket;
  m.stream_created = kCreated;
  m.scope = Scope().prefixes();
  m.has_scope = true;
  m.cursor = cursor;
  m.eviction_observed = memo;
  if (s.flavour == Flavour::kMarkers) {
    // The latest anchor an exporter that kept up can have had: nothing
    // after the cursor was stored yet (the next message's time, or now).
    m.cursor_time_ns = (cursor < LastSeq(s) ? s.log[cursor].time : s.now) * kTickNs;
    m.marker_ttl_ns = kMarkerTtlTicks * kTickNs;
  }
  int live = 0;
  for (int k = 0; k < kMaxKeys; ++k) live += TruthAt(s, k, cursor).has_value();
  m.entry_count = live;
  return m;
}

core::RestoreTarget Target(const State& s) {
  core::RestoreTarget t;
  t.bucket = kBucket;
  t.stream_created = kCreated;
  t.scope = Scope();
  if (s.cause != RepairCause::kUnanchored && s.cause != RepairCause::kFreshStart) {
    t.fold_cursor = s.cursor;
  }
  t.first_seq = FirstSeq(s);
  const StreamState st = Stream(s);
  t.marker_ttl_ns = st.marker_ttl_ns;
  t.server_time_ns = st.server_time_ns;
  return t;
}

std::string Describe(const std::optional<Entry>& e) {
  if (!e) return "none";
  if (e->deleted) return "deleted@" + std::to_string(e->revision);
  return e->value + "@" + std::to_string(e->revision);
}

// Applies `c` to the fold as a store does, after checking what no commit may
// do (SPEC §2.1, §2.4): move the cursor backward or past the stream, move a
// key's revision backward, write an entry no message made, or delete a key
// that is live in the truth as of the delete's revision. Returns the first
// violation, "" when none.
std::string ApplyCommit(State& s, const FoldCommit& c) {
  if (c.cursor && s.cursor && *c.cursor < *s.cursor) {
    return "the cursor moved backward, from " + std::to_string(*s.cursor) + " to " +
           std::to_string(*c.cursor);
  }
  if (c.cursor && *c.cursor > LastSeq(s)) {
    return "the cursor " + std::to_string(*c.cursor) + " passed the stream's last sequence " +
           std::to_string(LastSeq(s));
  }
  FoldCommit::CountChange stated;
  for (const auto& [key, e] : c.entries) {
    const int k = KeyIndex(key);
    const std::optional<Entry>& old = s.fold[k];
    const std::string what = "key " + key + ": " + Describe(old) + " -> " + Describe(e);
    if (old && e.revision < old->revision) return "a revision went backward (" + what + ")";
    if (old && e.revision == old->revision && e != *old) {
      return "one revision, two states (" + what + ")";
    }
    if (e.deleted && TruthAt(s, k, e.revision)) {
      // A delete reports a state the key really was in at or after the
      // revision it carries: a repair's tombstone carries the revision read
      // before its listing, and the key may have been deleted only since.
      bool deleted_since = false;
      for (uint64_t seq = e.revision + 1; seq <= LastSeq(s); ++seq) {
        deleted_since = deleted_since || (s.log[seq - 1].key == k && !s.log[seq - 1].put);
      }
      if (!deleted_since) {
        return "phantom delete: the key is live in the truth from revision " +
               std::to_string(e.revision) + " on (" + what + ")";
      }
    } else if (!e.deleted &&
               (e.revision < 1 || e.revision > LastSeq(s) || s.log[e.revision - 1].key != k ||
                !s.log[e.revision - 1].put || e.value != Value(e.revision))) {
      return "an entry no message wrote (" + what + ")";
    }
    core::AddCountChange(core::CountChangeOf(old ? &*old : nullptr, e), &stated);
  }
  auto counts = [&s] {
    FoldCommit::CountChange n;
    for (const auto& e : s.fold) {
      n.entries += e.has_value();
      n.live_keys += e && !e->deleted;
    }
    return n;
  };
  const FoldCommit::CountChange before = counts();
  for (const auto& [key, e] : c.entries) s.fold[KeyIndex(key)] = e;
  if (c.cursor) s.cursor = c.cursor;
  if (c.cursor_time_ns) s.cursor_time = static_cast<uint8_t>(*c.cursor_time_ns / kTickNs);
  if (c.eviction_observed && *c.eviction_observed) s.memo = true;
  const FoldCommit::CountChange after = counts();
  if (after.live_keys - before.live_keys != stated.live_keys ||
      after.entries - before.entries != stated.entries) {
    return "the stated count change is not the fold's";
  }
  return "";
}

void Node::EmitCommit(const std::string& label, const State& s, const FoldCommit& commit,
                      const std::function<std::string(State&)>& after) {
  State n = s;
  std::string violation = ApplyCommit(n, commit);
  if (violation.empty()) violation = after(n);
  Emit(label, std::move(n), std::move(violation));
}

void Node::World(const State& s) {
  const uint64_t last = LastSeq(s);
  if (static_cast<int>(last) < bounds_.seqs) {
    for (int k = 0; k < bounds_.keys; ++k) {
      for (bool put : {true, false}) {
        State n = s;
        // History 1: the key's previous message leaves the stream.
        if (auto prev = LastRetainedOf(n, k)) n.retained &= ~(1u << (*prev - 1));
        n.log.push_back(Message{static_cast<uint8_t>(k), put, false, s.now});
        n.retained |= 1u << last;
        Emit(std::string(put ? "put " : "delete ") + kKeys[k] + "@" + std::to_string(last + 1),
             std::move(n));
      }
    }
  }
  if (s.flavour == Flavour::kMarkers) return MarkerWorld(s);
  const uint64_t first = FirstSeq(s);
  if (first <= last) {
    const Message& m = s.log[first - 1];
    if (s.flavour == Flavour::kEvicts || !m.put) {
      State n = s;
      n.retained &= ~(1u << (first - 1));
      Emit(std::string(s.flavour == Flavour::kEvicts ? "evict " : "purge marker ") +
               std::to_string(first),
           std::move(n));
    }
  }
}

// The clock, the expiry of a put (its TTL ran out: a limit marker
// replaces it) and the expiry of a marker, kMarkerTtlTicks after it was
// written, wherever it stands in the stream.
void Node::MarkerWorld(const State& s) {
  const uint64_t last = LastSeq(s);
  if (s.now < bounds_.ticks) {
    State n = s;
    ++n.now;
    Emit("tick to " + std::to_string(n.now), std::move(n));
  }
  for (int k = 0; k < bounds_.keys && static_cast<int>(last) < bounds_.seqs; ++k) {
    auto prev = LastRetainedOf(s, k);
    if (!prev || !s.log[*prev - 1].put) continue;
    State n = s;
    n.retained &= ~(1u << (*prev - 1));
    n.log.push_back(Message{static_cast<uint8_t>(k), false, true, s.now});
    n.retained |= 1u << last;
    Emit(std::string("expire ") + kKeys[k] + ": marker@" + std::to_string(last + 1), std::move(n));
  }
  for (uint64_t seq = 1; seq <= last; ++seq) {
    const Message& m = s.log[seq - 1];
    if (!Retained(s, seq) || !m.marker || s.now - m.time < kMarkerTtlTicks) continue;
    State n = s;
    n.retained &= ~(1u << (seq - 1));
    Emit("marker " + std::to_string(seq) + " expires", std::move(n));
  }
}

void Node::Watch(const State& s) {
  // The next message the delivery hands over: ordered, from where it
  // started, skipping what the stream no longer holds. A floor trip still
  // folds what arrives before the repair (the session drains its delivery);
  // a window check at a session's start opened none.
  const bool delivering = s.mode == Mode::kWatching || s.cause == RepairCause::kFloorTrip;
  const auto& received = s.guard.received();
  const uint64_t from = received ? std::max(*received + 1, s.deliver_from) : s.deliver_from;
  for (uint64_t seq = from; delivering && seq <= LastSeq(s); ++seq) {
    if (!Retained(s, seq)) continue;
    State n = s;
    const Message& msg = s.log[seq - 1];
    const std::string key = kKeys[msg.key];
    BucketMessage m;
    m.key = key;
    m.op = msg.put ? Op::kPut : Op::kDelete;
    if (msg.put) m.value = Value(seq);
    m.seq = seq;
    std::optional<Entry> current;
    if (const Entry* p = n.pending.Find(key)) {
      current = *p;
    } else if (auto f = n.in_flight ? n.in_flight->entries.find(key)
                                    : std::map<std::string, Entry>::iterator();
               n.in_flight && f != n.in_flight->entries.end()) {
      current = f->second;  // being written: the fold may not show it yet
    } else {
      current = n.fold[msg.key];
    }
    if (auto next = core::FoldMessage(m, current)) n.pending.Put(key, std::move(*next));
    // WatchLoop::Apply: a jump in sequences on a marker bucket is a stretch
    // read now, which must be inside the window (MarkerStretchHolds).
    bool trip = false;
    if (n.guard.Jumps(seq) && Window(n) && !ReceivedInsideWindow(n)) {
      n.guard.LoseAnchor();
      if (n.mode == Mode::kWatching) {
        EnterRepair(n, RepairCause::kFloorTrip);
        trip = true;
      }
    }
    n.guard.Receive(seq, msg.time * kTickNs);
    AdvanceCursor(n);
    Emit("deliver " + std::to_string(seq) + (trip ? " (outside the marker window: trip)" : ""),
         std::move(n));
    break;
  }
  if (s.mode != Mode::kWatching) return;  // a repair only drains deliveries

  if (s.guard.unverified()) {
    State n = s;
    CheckFloor(n);
    Emit("floor check", std::move(n));
  }
  const bool stale_anchor = Window(s) && received && s.guard.received_anchor() < s.now * kTickNs;
  if (received.value_or(0) < LastSeq(s) || stale_anchor) {
    // WatchLoop::Probe: last_seq first, then the store's proof that nothing
    // in scope up to it is still to come, then the floor again. On a marker
    // bucket the stretch proved empty is read now: inside the window or a
    // trip. A position with nothing stored after it takes the reply's time
    // as its anchor (ReanchorReceived, ReceiveQuietStretch).
    State n = s;
    if (CheckFloor(n)) {
      WorldSource source(n);
      const uint64_t last = LastSeq(n);
      const uint64_t from_seq = n.guard.received().value_or(0);
      auto next = source.FirstRetainedInScope(Scope(), from_seq + 1);
      if (last <= from_seq) {
        if (n.guard.received() && !n.guard.anchor_lost()) {
          n.guard.ReanchorReceived(n.now * kTickNs);  // nothing at all after received
          AdvanceCursor(n);
        }
      } else if (core::NothingInScopeToCome(last, *next)) {
        if (Window(n) && !ReceivedInsideWindow(n)) {
          n.guard.LoseAnchor();
          EnterRepair(n, RepairCause::kFloorTrip);
        } else {
          n.guard.ReceiveQuietStretch(last, n.now * kTickNs);
          CheckFloor(n);
        }
      }
    }
    Emit("probe", std::move(n));
  }
}

// The watch's background committer (WatchLoop::TryCommit and Collect): what
// is pending is handed over while deliveries go on; a failed batch goes
// back under what arrived meanwhile (PendingBatch::TakeBack) for the next
// attempt.
void Node::Commit(const State& s) {
  if (!s.in_flight) {
    const std::optional<uint64_t> handed = s.cursor;
    // CommitPipeline::AnchorRefreshDue: an idle cursor's newer anchor is
    // committed too (here at any time; the product waits a quarter window).
    const bool refresh = s.pending.cursor() && s.pending.cursor() == s.cursor &&
                         s.pending.cursor_time_ns() > s.cursor_time * kTickNs;
    if (!s.pending.HasWork(handed) && !refresh) return;
    State n = s;
    n.in_flight = n.pending.Release();
    return Emit("hand a commit over", std::move(n));
  }
  State ok = s;
  std::string violation = ApplyCommit(ok, *ok.in_flight);
  ok.in_flight.reset();
  Emit("commit", std::move(ok), std::move(violation));
  if (s.transients < bounds_.transients) {
    State failed = s;
    ++failed.transients;
    failed.pending.TakeBack(std::move(*failed.in_flight));
    failed.in_flight.reset();
    Emit("commit fails (transient)", std::move(failed));
  }
}

void Node::Repair(const State& s) {
  if (s.mode == Mode::kRepair) {
    if (s.in_flight || s.pending.HasWork(s.cursor)) return;  // the flush comes first
    State n = s;
    const StreamState st = Stream(n);
    NoteRetention(n, st);
    const Retention retention = ClassifyRetention(st, n.memo);
    const core::RepairChoice choice = core::ChooseRepair(n.policy, n.cause, retention);
    const std::string label = std::string("repair (") + core::RepairCauseName(n.cause) + "): ";
    auto refuse = [&](const std::string& why) {
      State r = n;
      ResetMemory(r);
      Emit(label + "refused: " + why, std::move(r));
    };
    switch (choice.action) {
      case RepairAction::kRefuse:
        return refuse(choice.why);
      case RepairAction::kResync:
        return Emit(label + "resync", n, "policy none is not modelled, yet it was chosen");
      case RepairAction::kRelist:
        n.mode = Mode::kRelist;
        n.phase = Phase::kListing;
        n.listing_revision = LastSeq(n);
        n.listing_time = n.now;  // RunRelist reads the stream before it lists
        return Emit(label + "relist, listing through " + std::to_string(n.listing_revision),
                    std::move(n));
      case RepairAction::kRestore: {
        if (n.artifact == 0) refuse("no artifact yet");
        for (uint64_t a = std::max<uint64_t>(n.artifact, 1); a <= LastSeq(n); ++a) {
          State r = n;
          r.artifact = static_cast<uint8_t>(a);
          const std::string with = label + "restore from the artifact at " + std::to_string(a);
          const Status ok = core::CheckRestore(Manifest(r, r.artifact), Target(r));
          if (!ok.ok()) {
            ResetMemory(r);
            Emit(with + ": refused: " + ok.ToString(), std::move(r));
            continue;
          }
          r.mode = Mode::kRestore;
          r.restore_cursor = r.artifact;
          // The walk begins at once; the listing waits for the first live
          // fold key the artifact lacks (RestoreAttempt::ListOnce).
          r.phase = Phase::kWalk;
          r.step = 0;
          r.restore_evicted = Manifest(r, r.restore_cursor).eviction_observed || r.memo ||
                              ClassifyRetention(st, false).has_evicted;
          Emit(with, std::move(r));
        }
        return;
      }
    }
    return;
  }

  if (s.phase == Phase::kListing) {
    // The listing names each key whose latest message is a put at or below
    // the revision read before it began. A key rewritten while it ran may
    // be missed (its old message left, its new one is past the revision):
    // the worst case, which LiveInBucket's last check exists for.
    State n = s;
    n.listed = 0;
    for (int k = 0; k < bounds_.keys; ++k) {
      auto seq = LastRetainedOf(n, k);
      if (seq && *seq <= n.listing_revision && n.log[*seq - 1].put) n.listed |= 1u << k;
    }
    const StreamState after = Stream(n);
    if (n.mode == Mode::kRelist) {
      if (!ClassifyRetention(after, n.memo).listing_is_truth) {
        // RunRelist: the bucket evicted while the listing ran; decide again.
        EnterRepair(n, n.cause);
        n.listed = 0;
        n.listing_revision = 0;
        return Emit("listing ends: no longer the truth, relist abandoned", std::move(n));
      }
    } else {
      const ArtifactManifest m = Manifest(n, n.restore_cursor);
      const Status ok = core::CheckRestore(m, Target(n));
      if (!ok.ok()) {
        // What the walk committed before the listing stays under the old
        // cursor, as after a crash: a later attempt merges over it.
        State r = n;
        ResetMemory(r);
        return Emit("listing ends: restore refused: " + ok.ToString(), std::move(r));
      }
      n.restore_evicted =
          m.eviction_observed || n.memo || ClassifyRetention(after, false).has_evicted;
    }
    n.phase = Phase::kWalk;
    // A relist lists before its walk; a restore goes on from the key that
    // needed the listing.
    if (n.mode == Mode::kRelist) n.step = 0;
    return Emit("listing ends", std::move(n));
  }

  // The walk: one key per step, one commit per changed key, the cursor
  // untouched until the final commit (a crash between them re-runs the
  // whole repair over what was committed).
  const bool restore = s.mode == Mode::kRestore;
  for (int k = s.step; k < bounds_.keys; ++k) {
    const std::optional<Entry>& fold = s.fold[k];
    const std::optional<Entry> art =
        restore ? TruthAt(s, k, s.restore_cursor) : std::optional<Entry>();
    if (!fold && !art) continue;
    const std::string key = kKeys[k];
    bool live = false;
    uint64_t delete_revision = s.listing_revision;
    if (fold && !art && !fold->deleted) {
      if (restore && s.listing_revision == 0) {
        State n = s;
        n.phase = Phase::kListing;
        n.step = static_cast<uint8_t>(k);
        n.listing_revision = LastSeq(n);
        return Emit("restore " + key + ": a live fold key the artifact lacks: listing through " +
                        std::to_string(n.listing_revision),
                    std::move(n));
      }
      WorldSource source(s);
      repair::ListedKeys listed(1 << 16, "");
      for (int j = 0; j < bounds_.keys; ++j) {
        if (s.listed & (1u << j)) (void)listed.Add(kKeys[j]);
      }
      auto l = repair::LiveInBucket(
          source, listed, key, s.listing_revision, &delete_revision,
          restore ? std::optional<uint64_t>(s.restore_cursor + 1) : std::nullopt);
      if (!l.ok() && l.status().IsFailedPrecondition() && restore) {
        // Retention moved while the key was checked: the attempt is
        // abandoned (what it committed stays under the old cursor).
        State r = s;
        ResetMemory(r);
        return Emit("restore " + key + ": abandoned: " + l.status().message(), std::move(r));
      }
      if (!l.ok()) return Emit("repair " + key, s, "LiveInBucket: " + l.status().ToString());
      live = *l;
    }
    const std::optional<core::KeyChange> change =
        restore ? core::RestoreKey(fold, art, live, delete_revision, /*rebase=*/false)
                : core::RelistKey(*fold, live, delete_revision, /*rebase=*/false);
    const std::string label = std::string(restore ? "restore " : "relist ") + key;
    if (!change) {
      State n = s;
      n.step = static_cast<uint8_t>(k + 1);
      return Emit(label + ": keep " + Describe(fold), std::move(n));
    }
    FoldCommit commit;
    commit.entries[key] = change->entry;
    return EmitCommit(label + ": " + Describe(fold) + " -> " + Describe(change->entry), s, commit,
                      [k](State& n) {
                        n.step = static_cast<uint8_t>(k + 1);
                        ++n.repair_writes;
                        return std::string();
                      });
  }

  // The final commit.
  if (!restore) {
    // RunRelist's final commit carries no cursor; the watch resumes from
    // where it was, with the listing's revision as a floor on a bucket that
    // keeps current values. A fold with a cursor is anchored at the
    // listing's start on a bucket with markers (WatchLoop::Relist).
    auto finish = [](State& n) {
      n.guard.RaiseRelistFloor(n.listing_revision);
      n.unanchored = false;
      n.phase = Phase::kNone;
      n.step = 0;
      n.listed = 0;
      n.listing_revision = 0;
      n.listing_time = 0;
      n.repair_writes = 0;
      AdvanceCursor(n);
      return StartSession(n);
    };
    if (s.flavour == Flavour::kMarkers && s.cursor && s.listing_time > 0 &&
        !KVFOLD_MUTANT("relist-keep-old-anchor")) {
      FoldCommit anchor;
      anchor.cursor_time_ns = s.listing_time * kTickNs;
      const uint8_t t = s.listing_time;
      const auto covered = static_cast<uint8_t>(s.listing_revision);
      return EmitCommit("relist done, anchored at tick " + std::to_string(t), s, anchor,
                        [t, covered, finish](State& n) {
                          n.listing_covered = std::max(n.listing_covered, covered);
                          n.guard.ReanchorAfterListing(t * kTickNs);
                          if (n.cursor) n.pending.AdvanceTo(*n.cursor, t * kTickNs);
                          return finish(n);
                        });
    }
    State n = s;
    std::string violation = finish(n);
    return Emit("relist done", std::move(n), std::move(violation));
  }
  FoldCommit final_commit;
  final_commit.cursor = s.restore_cursor;
  const int64_t anchor = Manifest(s, s.restore_cursor).cursor_time_ns;
  if (anchor > 0) final_commit.cursor_time_ns = anchor;
  if (s.restore_evicted) final_commit.eviction_observed = true;
  EmitCommit("restore done: cursor -> " + std::to_string(s.restore_cursor), s, final_commit,
             [](State& n) {
               // The watch resumes from the artifact's cursor, in a new session.
               const uint64_t cursor = n.restore_cursor;
               const FloorGuard guard = n.guard;  // its relist floor stays
               ResetMemory(n);
               n.guard = guard;
               n.listing_covered = 0;  // the exporter's anchor keeps the plain promise
               n.guard.ResetTo(cursor, n.cursor_time * kTickNs, /*new_stream=*/false);
               n.pending.AdvanceTo(cursor, n.cursor_time * kTickNs);
               return StartSession(n);
             });
}

void Node::Successors(const State& s) {
  World(s);
  switch (s.mode) {
    case Mode::kDown: {
      State n = s;
      Prepare(n);
      std::string violation = StartSession(n);
      Emit("restart", std::move(n), std::move(violation));
      return;  // nothing to crash
    }
    case Mode::kWatching:
    case Mode::kRepair:
      Watch(s);
      Commit(s);
      if (s.mode == Mode::kRepair) Repair(s);
      break;
    case Mode::kRelist:
    case Mode::kRestore:
      Repair(s);
      break;
  }
  if (s.crashes < bounds_.crashes) {
    State n = s;
    ++n.crashes;
    ResetMemory(n);
    Emit("crash", std::move(n));
  }
}

// ---- Oracles over a state -------------------------------------------------

std::string LiveSet(const std::array<std::optional<Entry>, kMaxKeys>& entries) {
  std::string out;
  for (int k = 0; k < kMaxKeys; ++k) {
    if (entries[k] && !entries[k]->deleted) {
      out += std::string(out.empty() ? "" : " ") + kKeys[k] + "=" + Describe(entries[k]);
    }
  }
  return "{" + out + "}";
}

bool SameLive(const std::array<std::optional<Entry>, kMaxKeys>& a,
              const std::array<std::optional<Entry>, kMaxKeys>& b) {
  for (int k = 0; k < kMaxKeys; ++k) {
    const bool live_a = a[k] && !a[k]->deleted, live_b = b[k] && !b[k]->deleted;
    if (live_a != live_b || (live_a && *a[k] != *b[k])) return false;
  }
  return true;
}

std::string CheckState(const State& s) {
  std::array<std::optional<Entry>, kMaxKeys> truth;
  for (int k = 0; k < kMaxKeys; ++k) truth[k] = TruthAt(s, k, LastSeq(s));
  if (!s.cursor) return "";
  const uint64_t c = *s.cursor;
  if (c > LastSeq(s)) return "the cursor is past the stream's last sequence";
  // The anchor's promise: every message after the cursor was stored at or
  // after it, except those a relist's listing stands for.
  for (uint64_t seq = std::max<uint64_t>(c, s.listing_covered) + 1;
       s.flavour == Flavour::kMarkers && seq <= LastSeq(s); ++seq) {
    if (s.log[seq - 1].time < s.cursor_time) {
      return "the cursor " + std::to_string(c) + "'s anchor (tick " +
             std::to_string(s.cursor_time) + ") is later than message " + std::to_string(seq) +
             " (tick " + std::to_string(s.log[seq - 1].time) + ")";
    }
  }
  const bool repairing =
      s.mode == Mode::kRepair || s.mode == Mode::kRelist || s.mode == Mode::kRestore;
  if (c == LastSeq(s) && !repairing && !SameLive(s.fold, truth)) {
    return "caught up at " + std::to_string(c) + " but the fold " + LiveSet(s.fold) +
           " is not the truth " + LiveSet(truth);
  }
  // Fold + tail = truth, whenever the tail after the cursor is complete:
  // every key's last message, when past the cursor, is still held.
  for (int k = 0; k < kMaxKeys; ++k) {
    for (uint64_t seq = LastSeq(s); seq > c; --seq) {
      if (s.log[seq - 1].key != k) continue;
      if (!Retained(s, seq)) return "";
      break;
    }
  }
  auto replayed = s.fold;
  for (uint64_t seq = c + 1; seq <= LastSeq(s); ++seq) {
    if (!Retained(s, seq)) continue;
    const Message& m = s.log[seq - 1];
    auto& e = replayed[m.key];
    if (!e || seq > e->revision) e = Entry{seq, !m.put, m.put ? Value(seq) : ""};
  }
  if (!SameLive(replayed, truth)) {
    return "fold + tail after cursor " + std::to_string(c) + " is " + LiveSet(replayed) +
           ", not the truth " + LiveSet(truth);
  }
  return "";
}

// ---- The search --------------------------------------------------------------

// The set of states seen, by encoding: the encodings packed in one arena
// and an open-addressing table of (hash, index), which keeps a lookup to a
// cache line or two on a table of millions.
class StateSet {
 public:
  StateSet() : slots_(1 << 16) {}

  size_t size() const { return ends_.size(); }

  bool Contains(std::string_view key) const { return slots_[Find(key, Hash(key))].id != kEmpty; }

  // Adds `key`; false when it was there already.
  bool Insert(std::string_view key) {
    if (2 * (ends_.size() + 1) > slots_.size()) Grow();
    const uint64_t h = Hash(key);
    Slot& slot = slots_[Find(key, h)];
    if (slot.id != kEmpty) return false;
    slot = Slot{h, static_cast<uint32_t>(ends_.size())};
    arena_.append(key);
    ends_.push_back(arena_.size());
    return true;
  }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Slot {
    uint64_t hash = 0;
    uint32_t id = kEmpty;
  };

  static uint64_t Hash(std::string_view key) { return std::hash<std::string_view>()(key); }

  std::string_view Key(uint32_t id) const {
    const size_t begin = id == 0 ? 0 : ends_[id - 1];
    return std::string_view(arena_).substr(begin, ends_[id] - begin);
  }

  // The slot holding `key`, or the empty slot where it would go.
  size_t Find(std::string_view key, uint64_t h) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& slot = slots_[i];
      if (slot.id == kEmpty || (slot.hash == h && Key(slot.id) == key)) return i;
    }
  }

  void Grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    const size_t mask = slots_.size() - 1;
    for (const Slot& slot : old) {
      if (slot.id == kEmpty) continue;
      size_t i = slot.hash & mask;
      while (slots_[i].id != kEmpty) i = (i + 1) & mask;
      slots_[i] = slot;
    }
  }

  std::vector<Slot> slots_;  // a power of two, at most half full
  std::string arena_;
  std::vector<size_t> ends_;
};

class Explorer {
 public:
  explicit Explorer(const Bounds& bounds) : bounds_(bounds) {}

  int Run();

 private:
  struct Visit {
    uint32_t parent;
    uint32_t label;
  };

  uint32_t Label(const std::string& label) {
    auto [it, added] = label_ids_.try_emplace(label, static_cast<uint32_t>(labels_.size()));
    if (added) labels_.push_back(label);
    return it->second;
  }
  std::string Trace(uint32_t id) const;
  // True when the search has seen this state with at least as much crash
  // and failure budget left: whatever it can reach, that one reaches too.
  bool Subsumed(std::string& key, const State& s) const {
    const size_t n = key.size();
    const char crashes = key[n - 2], transients = key[n - 1];
    bool found = false;
    for (int c = 0; c <= s.crashes && !found; ++c) {
      for (int t = 0; t <= s.transients && !found; ++t) {
        if (c == s.crashes && t == s.transients) continue;
        key[n - 2] = static_cast<char>(c);
        key[n - 1] = static_cast<char>(t);
        found = seen_.Contains(key);
      }
    }
    key[n - 2] = crashes;
    key[n - 1] = transients;
    return found;
  }
  void Report(uint32_t parent, const std::string& label, const State& s,
              const std::string& violation);

  Bounds bounds_;
  StateSet seen_;
  std::vector<Visit> visits_;
  std::vector<std::string> labels_;
  std::unordered_map<std::string, uint32_t> label_ids_;
  uint64_t transitions_ = 0;
  uint64_t violations_ = 0;
};

std::string Explorer::Trace(uint32_t id) const {
  std::vector<uint32_t> path;
  for (uint32_t at = id; visits_[at].parent != at; at = visits_[at].parent) path.push_back(at);
  std::string out;
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    out += "    " + labels_[visits_[*it].label] + "\n";
  }
  return out;
}

void Explorer::Report(uint32_t parent, const std::string& label, const State& s,
                      const std::string& violation) {
  ++violations_;
  if (violations_ > 3) return;
  std::fprintf(stderr, "model: violation %llu: %s\n  bucket %s, policy %s; after:\n%s    %s\n",
               static_cast<unsigned long long>(violations_), violation.c_str(),
               s.flavour == Flavour::kEvicts    ? "evicts current values (discard old, max_msgs)"
               : s.flavour == Flavour::kMarkers ? "per-message TTL with limit markers"
                                                : "keeps current values (history 1)",
               std::string(ExpiryRepairName(s.policy)).c_str(), Trace(parent).c_str(),
               label.c_str());
}

int Explorer::Run() {
  std::deque<std::pair<uint32_t, State>> queue;
  labels_.push_back("start");
  // Relist on a bucket that keeps current values is what auto does there,
  // and restore on an evicting bucket is what auto does there once it has
  // evicted (before, nothing can expire): neither adds a state.
  const std::pair<Flavour, ExpiryRepair> configs[] = {
      {Flavour::kKeeps, ExpiryRepair::kAuto},   {Flavour::kKeeps, ExpiryRepair::kRestore},
      {Flavour::kEvicts, ExpiryRepair::kAuto},  {Flavour::kEvicts, ExpiryRepair::kRelist},
      {Flavour::kMarkers, ExpiryRepair::kAuto},
  };
  for (const auto& [flavour, policy] : configs) {
    {
      State s;
      s.flavour = flavour;
      s.policy = policy;
      const uint32_t id = static_cast<uint32_t>(visits_.size());
      seen_.Insert(Encode(s));
      visits_.push_back(Visit{id, 0});
      queue.emplace_back(id, std::move(s));
    }
  }
  std::vector<Step> steps;
  while (!queue.empty()) {
    auto [id, s] = std::move(queue.front());
    queue.pop_front();
    steps.clear();
    Node(bounds_, &steps).Successors(s);
    for (Step& step : steps) {
      ++transitions_;
      std::string violation = step.violation;
      if (violation.empty()) violation = CheckState(step.next);
      if (!violation.empty()) {
        Report(id, step.label, step.next, violation);
        continue;  // not explored further: one report per broken path
      }
      std::string key = Encode(step.next);
      if (Subsumed(key, step.next)) continue;
      if (!seen_.Insert(key)) continue;
      const uint32_t next_id = static_cast<uint32_t>(visits_.size());
      visits_.push_back(Visit{id, Label(step.label)});
      queue.emplace_back(next_id, std::move(step.next));
    }
  }
  std::printf("model: %zu unique states, %llu transitions, %llu violations\n", seen_.size(),
              static_cast<unsigned long long>(transitions_),
              static_cast<unsigned long long>(violations_));
  return violations_ > 0 ? 1 : 0;
}

int Main(int argc, char** argv) {
  Bounds bounds;
  for (int i = 1; i < argc; ++i) {
    auto number = [&](int max) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a number\n", argv[i]);
        std::exit(2);
      }
      const int v = std::atoi(argv[++i]);
      if (v < 0 || v > max) {
        std::fprintf(stderr, "%s must be in [0, %d]\n", argv[i - 1], max);
        std::exit(2);
      }
      return v;
    };
    if (std::strcmp(argv[i], "--deep") == 0) {
      // Minutes and several GB: for manual runs. (--keys 3 at 4 sequences
      // is the other direction, about a minute.)
      bounds.seqs = 5;
    } else if (std::strcmp(argv[i], "--keys") == 0) {
      bounds.keys = std::max(1, number(kMaxKeys));
    } else if (std::strcmp(argv[i], "--seqs") == 0) {
      bounds.seqs = number(kMaxSeqs);
    } else if (std::strcmp(argv[i], "--crashes") == 0) {
      bounds.crashes = number(9);
    } else if (std::strcmp(argv[i], "--transients") == 0) {
      bounds.transients = number(9);
    } else if (std::strcmp(argv[i], "--ticks") == 0) {
      bounds.ticks = std::max(1, number(9));
    } else {
      std::fprintf(stderr,
                   "usage: kvfold_model [--deep] [--keys N] [--seqs N] [--crashes N] "
                   "[--transients N] [--ticks N]\n");
      return 2;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  std::fprintf(stderr,
               "model: %d keys, %d sequences, %d crash(es), %d transient failure(s), %d ticks\n",
               bounds.keys, bounds.seqs, bounds.crashes, bounds.transients, bounds.ticks);
  const int rc = Explorer(bounds).Run();
  std::fprintf(stderr, "model: %.1f s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return rc;
}

}  // namespace
}  // namespace kvfold::model

int main(int argc, char** argv) { return kvfold::model::Main(argc, argv); }
