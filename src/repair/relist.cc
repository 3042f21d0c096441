// Relist: the key-listing diff. On a bucket whose listing is the
// truth current values are never evicted, so after a gap only deletes can
// be missing: a headers-only listing finds them, no value is fetched.

#include "core/mutation.h"
#include "core/repair_rules.h"
#include "kvfold/retention.h"
#include "repair/change_writer.h"
#include "repair/listed_keys.h"
#include "repair/repair_drivers.h"

namespace kvfold::repair {

Status RunRelist(RepairContext& ctx, const Scope& scope, ChangeOrigin origin, bool rebase,
                 bool anchor_cursor, FoldCommit final_meta, RelistResult* out) {
  // An expiry before this read is in the listing (its key is not listed);
  // a marker written after it is read by the resume, in its window.
  auto before = ctx.source.ReadStream();
  if (!before.ok()) return before.status();
  ListedKeys listed(ctx.listing_memory_keys, ctx.spill_dir);
  uint64_t listing_revision = 0;
  KVFOLD_RETURN_IF_ERROR(ctx.source.ListKeys(
      scope, [&listed](std::string_view key, uint64_t) { return listed.Add(key); },
      &listing_revision));
  // A bucket that began evicting during the listing may have dropped keys
  // from it: then the listing is no proof of deletion.
  auto after = ctx.source.ReadStream();
  if (!after.ok()) return after.status();
  const Retention retention = ClassifyRetention(*after, ctx.eviction_observed);
  if (!retention.listing_is_truth && !KVFOLD_MUTANT("relist-skip-recheck")) {
    return Status::FailedPrecondition("the key listing stopped being the truth while it ran: " +
                                      DescribeRetention(*after, retention));
  }
  out->listing_revision = listing_revision;
  out->listed = listed.size();
  if (anchor_cursor && before->server_time_ns > 0 && !KVFOLD_MUTANT("relist-keep-old-anchor")) {
    out->anchor_ns = before->server_time_ns;
    final_meta.cursor_time_ns = out->anchor_ns;
  }

  ChangeWriter writer(ctx, origin);
  // Values only where a rule keeps one (a rebase rewrites a surviving
  // entry at revision 0); otherwise a change is a delete or nothing.
  FoldWalker walker(ctx.fold, scope, /*values=*/rebase);
  uint64_t since_stop_check = 0;
  while (true) {
    auto next = walker.Peek();
    if (!next.ok()) return next.status();
    if (*next == nullptr) break;
    const auto& [key, entry] = **next;
    bool live = false;
    uint64_t delete_revision = listing_revision;
    if (!entry.deleted) {
      auto c = LiveInBucket(ctx.source, listed, key, listing_revision, &delete_revision);
      if (!c.ok()) return c.status();
      live = *c;
    }
    if (auto change = core::RelistKey(entry, live, delete_revision, rebase)) {
      KVFOLD_RETURN_IF_ERROR(writer.Add(key, entry, change->entry, change->hook));
    }
    walker.Pop();
    if (++since_stop_check >= ctx.batch_size) {
      since_stop_check = 0;
      if (ctx.stop.stop_requested()) {
        KVFOLD_RETURN_IF_ERROR(writer.Flush());
        out->deleted = writer.deletes();
        out->stopped = true;
        return Status::OK();
      }
    }
  }
  out->deleted = writer.deletes();
  return writer.Finish(std::move(final_meta));
}

}  // namespace kvfold::repair
