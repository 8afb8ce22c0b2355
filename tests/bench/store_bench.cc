// Figure 2: a store cycle (claim + complete) per message, through
// store::Store as the agent's writer drives it (each transition inside a
// Store::WriteTransaction), beside the bare UPDATE statements on the same
// file (BareCycle):
//  - the eager single-row path: ClaimById in one transaction, Complete in the
//    next, per row;
//  - the sweeper's batch path: ClaimDue of 100 rows in one transaction, their
//    100 Completes in the next.
// Each side works on rows of its own topic, so neither finds the other's.
#include "bench_util.h"
#include "outbox/store.h"

namespace outbox::bench {
namespace {

constexpr char kOwner[] = "bench/1/1/1";
constexpr std::int64_t kLeaseMs = 180'000;
constexpr int kBatch = 100;

class StoreCycle {
 public:
  explicit StoreCycle(const std::string& path) {
    store::Options options;
    options.path = path;
    store_ = std::make_unique<store::Store>(options);
  }

  double Eager(const std::vector<std::int64_t>& ids) {
    store::Store& s = *store_;
    const auto start = SteadyClock::now();
    for (const std::int64_t id : ids) {
      std::optional<store::Claimed> claimed;
      {
        const std::int64_t now = WallMs();
        store::Store::WriteTransaction txn(s);
        claimed = s.ClaimById(id, kOwner, now + kLeaseMs, now);
        txn.Commit();
      }
      if (!claimed) throw std::runtime_error("claim by id: row not pending");
      {
        store::Store::WriteTransaction txn(s);
        s.Complete(claimed->lease, WallMs());
        txn.Commit();
      }
    }
    return static_cast<double>(ids.size()) / SecondsSince(start);
  }

  double Batch(const std::string& topic, int batches) {
    store::Store& s = *store_;
    std::int64_t rows = 0;
    const auto start = SteadyClock::now();
    for (int b = 0; b < batches; ++b) {
      std::vector<store::Claimed> claimed;
      {
        const std::int64_t now = WallMs();
        store::Store::WriteTransaction txn(s);
        claimed = s.ClaimDue(topic, kOwner, now + kLeaseMs, now, kBatch);
        txn.Commit();
      }
      if (claimed.size() != kBatch) throw std::runtime_error("claim due: ran out of rows");
      {
        const std::int64_t now = WallMs();
        store::Store::WriteTransaction txn(s);
        for (const auto& c : claimed) s.Complete(c.lease, now);
        txn.Commit();
      }
      rows += static_cast<std::int64_t>(claimed.size());
    }
    return static_cast<double>(rows) / SecondsSince(start);
  }

 private:
  std::unique_ptr<store::Store> store_;
};

// Hands out consecutive slices of a list of ids.
class IdFeed {
 public:
  explicit IdFeed(std::vector<std::int64_t> ids) : ids_(std::move(ids)) {}
  std::vector<std::int64_t> Take(int n) {
    if (next_ + static_cast<std::size_t>(n) > ids_.size()) throw std::runtime_error("out of ids");
    std::vector<std::int64_t> slice(ids_.begin() + static_cast<std::ptrdiff_t>(next_),
                                    ids_.begin() + static_cast<std::ptrdiff_t>(next_) + n);
    next_ += static_cast<std::size_t>(n);
    return slice;
  }

 private:
  std::vector<std::int64_t> ids_;
  std::size_t next_ = 0;
};

}  // namespace

void RunStore(const Settings& settings) {
  WorkDir dir(settings.dir);
  const std::string path = dir.File("store.db");
  CreateDatabase(path);
  const int eager_rows = settings.N(2000);
  const int batches = settings.N(50);
  const std::int64_t eager_total = static_cast<std::int64_t>(eager_rows) * (settings.reps + 1);
  const std::int64_t batch_total =
      static_cast<std::int64_t>(batches) * kBatch * (settings.reps + 1);
  BareCycle bare(path);
  InsertPending(bare.db(), "eager.ours", "e", eager_total);
  InsertPending(bare.db(), "eager.bare", "e", eager_total);
  InsertPending(bare.db(), "batch.ours", "b", batch_total);
  InsertPending(bare.db(), "batch.bare", "b", batch_total);
  StoreCycle ours(path);
  IdFeed ours_ids(PendingIds(bare.db(), "eager.ours"));
  IdFeed bare_ids(PendingIds(bare.db(), "eager.bare"));

  ours.Eager(ours_ids.Take(eager_rows));  // warm-up
  bare.Eager(bare_ids.Take(eager_rows));
  const Paired eager = RunPaired(
      settings.reps, [&] { return ours.Eager(ours_ids.Take(eager_rows)); },
      [&] { return bare.Eager(bare_ids.Take(eager_rows)); });
  Row("2 store cycle, eager path: ClaimById txn + Complete txn per row vs bare UPDATEs",
      FormatRate(eager.ours_median(), "rows/s"), FormatRate(eager.baseline_median(), "rows/s"),
      FormatRatio(eager.ratio_median()), "(plain C ≈ 22 000 rows/s)", std::nullopt);

  ours.Batch("batch.ours", batches);
  bare.Batch("batch.bare", batches, kBatch);
  const Paired batch = RunPaired(
      settings.reps, [&] { return ours.Batch("batch.ours", batches); },
      [&] { return bare.Batch("batch.bare", batches, kBatch); });
  Row("2 store cycle, sweeper path: ClaimDue(100) txn + 100 Completes txn vs bare UPDATEs",
      FormatRate(batch.ours_median(), "rows/s"), FormatRate(batch.baseline_median(), "rows/s"),
      FormatRatio(batch.ratio_median()), "(plain C ≈ 100 000 rows/s)", std::nullopt);
}

}  // namespace outbox::bench
