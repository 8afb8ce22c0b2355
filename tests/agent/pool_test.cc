#include "pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>

namespace outbox::agent {
namespace {

using namespace std::chrono_literals;

store::Claimed Lease(std::int64_t id) { return {{id, 1}, "t"}; }

// A claimed row carrying `bytes` bytes of payload.
store::Claimed Sized(std::int64_t id, std::size_t bytes) {
  store::Claimed claimed = Lease(id);
  claimed.row.payload.assign(bytes, 'p');
  return claimed;
}

std::vector<std::int64_t> IdsOf(const std::vector<store::Claimed>& claimed) {
  std::vector<std::int64_t> ids;
  for (const auto& c : claimed) ids.push_back(c.lease.id);
  return ids;
}

std::vector<store::Claimed> Leases(std::initializer_list<std::int64_t> ids) {
  std::vector<store::Claimed> out;
  for (auto id : ids) out.push_back(Lease(id));
  return out;
}

// Work that records each batch; the first call blocks until released, so a
// test can fill the queue while the only worker is busy.
class GatedWork {
 public:
  WorkerPool::Work Fn() {
    return [this](int, std::vector<store::Claimed>& batch, bool run) {
      bool first = false;
      {
        std::lock_guard lock(mutex_);
        runs_.push_back(run);
        std::vector<std::int64_t> ids;
        for (const auto& c : batch) ids.push_back(c.lease.id);
        batches_.push_back(ids);
        first = batches_.size() == 1;
      }
      if (first) {
        started_.set_value();
        release_.get_future().wait();
      }
    };
  }
  void WaitStarted() { started_.get_future().wait(); }
  void Release() { release_.set_value(); }
  std::vector<std::vector<std::int64_t>> batches() {
    std::lock_guard lock(mutex_);
    return batches_;
  }
  std::vector<bool> runs() {
    std::lock_guard lock(mutex_);
    return runs_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::vector<std::int64_t>> batches_;  // guarded by mutex_
  std::vector<bool> runs_;                          // guarded by mutex_
  std::promise<void> started_;
  std::promise<void> release_;
};

TEST(WorkerPool, BoundsTheQueueInBytesAndTakesAnOversizedRowAlone) {
  GatedWork work;
  WorkerPool pool("t", 1, {10, 10}, 1, work.Fn(), nullptr);
  EXPECT_TRUE(pool.TrySubmitAll({Sized(1, 5)}).empty());
  work.WaitStarted();  // the worker holds row 1; the queue is empty
  std::vector<store::Claimed> more;
  more.push_back(Sized(2, 6));
  more.push_back(Sized(3, 6));
  more.push_back(Sized(4, 1));
  // 2 fits; 3 would make 12 bytes; 4 stays behind 3 (order is kept).
  EXPECT_EQ(IdsOf(pool.TrySubmitAll(std::move(more))), (std::vector<std::int64_t>{3, 4}));
  // 9 rows by the row bound, but the 4 bytes left hold one row of the size
  // seen lately (about 5 bytes), and at least one is always offered.
  EXPECT_EQ(pool.FreeSlots(), 1);
  more.clear();
  more.push_back(Sized(5, 4));
  EXPECT_TRUE(pool.TrySubmitAll(std::move(more)).empty());  // 10 bytes: full
  EXPECT_EQ(pool.FreeSlots(), 0);
  work.Release();
  ASSERT_TRUE(pool.WaitIdle(std::chrono::steady_clock::now() + 10s));
  // An empty queue takes a row larger than the whole bound.
  more.clear();
  more.push_back(Sized(6, 100));
  EXPECT_TRUE(pool.TrySubmitAll(std::move(more)).empty());
  ASSERT_TRUE(pool.WaitIdle(std::chrono::steady_clock::now() + 10s));
  EXPECT_EQ(work.batches().size(), 4u);
}

TEST(WorkerPool, OffersOnlyTheRowsOfRecentSizeThatFitTheByteBound) {
  GatedWork work;
  WorkerPool pool("t", 1, {100, 1000}, 1, work.Fn(), nullptr);
  EXPECT_EQ(pool.FreeSlots(), 100);  // no size seen yet: the row bound
  EXPECT_TRUE(pool.TrySubmitAll({Sized(1, 100)}).empty());
  work.WaitStarted();
  std::vector<store::Claimed> more;
  for (std::int64_t id = 2; id <= 4; ++id) more.push_back(Sized(id, 100));
  EXPECT_TRUE(pool.TrySubmitAll(std::move(more)).empty());
  // 300 bytes queued: 700 left hold 7 rows of 100 bytes, not 97.
  EXPECT_EQ(pool.FreeSlots(), 7);
  work.Release();
  ASSERT_TRUE(pool.WaitIdle(std::chrono::steady_clock::now() + 10s));
  EXPECT_EQ(pool.FreeSlots(), 10);
}

TEST(WorkerPool, FillTargetHoldsTwoRefillsAndABatchPerWorkerWithinFloorAndBound) {
  constexpr std::int64_t kKiB = 1024, kBound = 4 * 1024 * kKiB;
  struct Case {
    std::int64_t row_bytes;
    int refill_rows, workers, batch_max;
    std::int64_t want;
  };
  for (const Case& c : {
           Case{0, 50, 2, 1, 256 * kKiB},              // no row seen yet: the floor
           Case{256, 50, 8, 1, 256 * kKiB},            // small rows: the floor (1 000 rows)
           Case{16 * kKiB, 50, 2, 1, 1600 * kKiB},     // 2 refills of 50 rows of 16 KiB
           Case{16 * kKiB, 50, 2, 100, 3200 * kKiB},   // a batch of 100 per worker
           Case{64 * kKiB, 50, 2, 1, kBound},          // 6.4 MB: the bound
       }) {
    EXPECT_EQ(WorkerPool::FillTarget(c.row_bytes, c.refill_rows, c.workers, c.batch_max, kBound),
              c.want)
        << c.row_bytes << " B/row, " << c.refill_rows << " rows/refill, " << c.workers
        << " workers × " << c.batch_max;
  }
  // A bound below the floor wins.
  EXPECT_EQ(WorkerPool::FillTarget(0, 50, 2, 1, 1000), 1000);
}

TEST(WorkerPool, OffersTheSweeperItsFillTargetNotTheWholeByteBound) {
  GatedWork work;
  WorkerPool pool("t", 1, {1000, 4 * 1024 * 1024, /*refill_rows=*/4}, 1, work.Fn(), nullptr);
  EXPECT_TRUE(pool.TrySubmitAll({Sized(1, 16 * 1024)}).empty());
  work.WaitStarted();  // the worker holds row 1
  // The target is its floor, 256 KiB (more than 2 refills of 4 rows): 16
  // rows of 16 KiB, not the 256 rows the 4 MiB bound would hold.
  EXPECT_EQ(pool.FreeSlots(), 16);
  EXPECT_EQ(pool.FreeRoom().bytes, 256 * 1024);
  EXPECT_EQ(pool.FreeRoom().row_bytes, 16 * 1024);
  std::vector<store::Claimed> more;
  for (std::int64_t id = 2; id <= 5; ++id) more.push_back(Sized(id, 16 * 1024));
  EXPECT_TRUE(pool.TrySubmitAll(std::move(more)).empty());
  EXPECT_EQ(pool.FreeSlots(), 12);
  EXPECT_EQ(pool.FreeRoom().bytes, 192 * 1024);
  // The target bounds what is offered, not what is taken: rows claimed
  // beyond it (larger than expected) still fit the byte bound.
  more.clear();
  for (std::int64_t id = 6; id <= 40; ++id) more.push_back(Sized(id, 16 * 1024));
  EXPECT_TRUE(pool.TrySubmitAll(std::move(more)).empty());
  EXPECT_EQ(pool.FreeSlots(), 0);
  EXPECT_EQ(pool.FreeRoom().bytes, 0);
  work.Release();
  ASSERT_TRUE(pool.WaitIdle(std::chrono::steady_clock::now() + 10s));
  EXPECT_EQ(work.batches().size(), 40u);
}

TEST(WorkerPool, TheFillTargetHoldsTwoRefillsOfTheSweepersClaimSize) {
  GatedWork work;
  WorkerPool pool("t", 1, {1000, 4 * 1024 * 1024, /*refill_rows=*/50}, 1, work.Fn(), nullptr);
  EXPECT_TRUE(pool.TrySubmitAll({Sized(1, 16 * 1024)}).empty());
  work.WaitStarted();
  // A refill of fewer rows would be a write transaction and an fsync for
  // every few rows: 100 rows of 16 KiB (1.6 MiB) may be claimed.
  EXPECT_EQ(pool.FreeSlots(), 100);
  work.Release();
  ASSERT_TRUE(pool.WaitIdle(std::chrono::steady_clock::now() + 10s));
}

TEST(WorkerPool, RefusesWhatDoesNotFitAndReturnsItInOrder) {
  GatedWork work;
  WorkerPool pool("t", 1, {2}, 1, work.Fn(), nullptr);
  EXPECT_TRUE(pool.TrySubmitAll(Leases({1})).empty());
  work.WaitStarted();
  EXPECT_EQ(pool.FreeSlots(), 2);
  const auto refused = pool.TrySubmitAll(Leases({2, 3, 4, 5}));
  ASSERT_EQ(refused.size(), 2u);
  EXPECT_EQ(refused[0].lease.id, 4);
  EXPECT_EQ(refused[1].lease.id, 5);
  EXPECT_EQ(pool.FreeSlots(), 0);
  work.Release();
  EXPECT_TRUE(pool.WaitIdle(std::chrono::steady_clock::now() + 10s));
  pool.StopIntake();
  pool.Join();
  EXPECT_EQ(work.batches(), (std::vector<std::vector<std::int64_t>>{{1}, {2}, {3}}));
}

TEST(WorkerPool, AWorkerTakesUpToBatchMaxLeasesTogether) {
  GatedWork work;
  WorkerPool pool("t", 1, {10}, 3, work.Fn(), nullptr);
  pool.TrySubmitAll(Leases({1}));
  work.WaitStarted();
  pool.TrySubmitAll(Leases({2, 3, 4, 5}));
  work.Release();
  EXPECT_TRUE(pool.WaitIdle(std::chrono::steady_clock::now() + 10s));
  pool.StopIntake();
  pool.Join();
  EXPECT_EQ(work.batches(), (std::vector<std::vector<std::int64_t>>{{1}, {2, 3, 4}, {5}}));
}

TEST(WorkerPool, ARunGoesWholeToOneWorkerAndABatchStopsBeforeIt) {
  GatedWork work;
  WorkerPool pool("t", 1, {4}, 2, work.Fn(), nullptr);
  pool.TrySubmitAll(Leases({1}));
  work.WaitStarted();
  pool.TrySubmitAll(Leases({2}));
  // Longer than batch_max, and only its first three fit: the rest comes back.
  EXPECT_EQ(IdsOf(pool.TrySubmitRun(Leases({3, 4, 5, 6}))), (std::vector<std::int64_t>{6}));
  work.Release();
  EXPECT_TRUE(pool.WaitIdle(std::chrono::steady_clock::now() + 10s));
  pool.StopIntake();
  pool.Join();
  // Row 2 would have had room for a partner in its batch: not the run's head.
  EXPECT_EQ(work.batches(), (std::vector<std::vector<std::int64_t>>{{1}, {2}, {3, 4, 5}}));
  EXPECT_EQ(work.runs(), (std::vector<bool>{false, false, true}));
}

TEST(WorkerPool, StopIntakeReturnsTheUnstartedLeasesAndRefusesMore) {
  GatedWork work;
  WorkerPool pool("t", 1, {10}, 1, work.Fn(), nullptr);
  pool.TrySubmitAll(Leases({1}));
  work.WaitStarted();
  pool.TrySubmitAll(Leases({2, 3}));
  const auto unstarted = pool.StopIntake();
  ASSERT_EQ(unstarted.size(), 2u);
  EXPECT_EQ(unstarted[0].lease.id, 2);
  EXPECT_EQ(pool.FreeSlots(), 0);
  EXPECT_EQ(pool.TrySubmitAll(Leases({4})).size(), 1u);
  // The running lease is not cut: the deadline passes while it still works.
  EXPECT_FALSE(pool.WaitIdle(std::chrono::steady_clock::now()));
  work.Release();
  pool.Join();
  EXPECT_EQ(work.batches().size(), 1u);
}

TEST(WorkerPool, ReportsRoomOnceTheQueueDrainedToHalf) {
  std::atomic<int> room{0};
  GatedWork work;
  {
    WorkerPool pool("t", 1, {4}, 1, work.Fn(), [&] { ++room; });
    pool.TrySubmitAll(Leases({1}));
    work.WaitStarted();
    pool.TrySubmitAll(Leases({2, 3, 4, 5}));
    EXPECT_EQ(room.load(), 0);
    work.Release();
    EXPECT_TRUE(pool.WaitIdle(std::chrono::steady_clock::now() + 10s));
  }  // the destructor stops and joins
  EXPECT_GE(room.load(), 1);
  EXPECT_EQ(work.batches().size(), 5u);
}

}  // namespace
}  // namespace outbox::agent
