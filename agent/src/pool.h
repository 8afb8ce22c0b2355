// A bounded pool of worker threads for one route.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "outbox/store.h"

namespace outbox::agent {

// Holds claimed rows (payloads included: the claim returned them) in a queue
// bounded in rows and in bytes. TrySubmitAll never blocks: a full pool says
// no and the caller reverts the claim. The byte bound is a limit, not a fill
// level: FreeSlots offers the sweeper only what keeps the workers busy until
// its next refill (FillTarget). Thread-safe; owns and joins its threads.
class WorkerPool {
 public:
  struct Capacity {
    int rows = 1000;
    // Payload and headers bytes queued; a row larger than this is still
    // taken when the queue is empty, so that it can be sent at all.
    std::int64_t bytes = 4 * 1024 * 1024;
    // Rows one refill of the sweeper should bring at least (its
    // claim_batch); see FillTarget.
    int refill_rows = 50;
    // Payload bytes one batch may carry (the endpoint's batch.max_bytes);
    // 0 = no bound. A single larger row still goes, alone.
    std::int64_t batch_bytes = 0;
  };

  // Runs on worker `index` with up to `batch_max` leases taken together, or
  // with one run (`run` true: rows of one ordering key, to be sent one after
  // another by this worker alone; see TrySubmitRun).
  using Work = std::function<void(int index, std::vector<store::Claimed>& batch, bool run)>;

  // `on_room` runs (on a worker thread, without locks) when the queue has
  // drained to half its capacity, so the sweeper can claim more.
  WorkerPool(std::string name, int workers, Capacity capacity, int batch_max, Work work,
             std::function<void()> on_room);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues as many of `claimed` as fit, under one lock and with one wake-up,
  // so that a worker finds the whole group (a batch endpoint then sends it
  // as one request instead of a fragment per wake-up). Returns the leases
  // that did not fit, in order.
  std::vector<store::Claimed> TrySubmitAll(std::vector<store::Claimed> claimed);
  // Queues a run (rows of one ordering key in id order) that one worker takes
  // whole: as many of its first rows as fit, and the first one even when the
  // queue is full (it stands for its key's row a worker just finished; the
  // queue may so exceed its row bound by one row per worker). Returns the
  // rest, in order.
  std::vector<store::Claimed> TrySubmitRun(std::vector<store::Claimed> run);
  // Rows queued plus workers busy: 0 or 1 when at most one key is being
  // served.
  int Load() const;
  // Rows the sweeper may claim now, by the row bound and by the fill target
  // at the size of the rows queued lately: 0 while the target is reached.
  int FreeSlots() const;

  // What the sweeper may claim now, read under one lock.
  struct Room {
    int rows = 0;  // as FreeSlots
    // Bytes of payload and headers up to the fill target (at least one
    // row's worth while the queue is empty); 0 while it is reached.
    std::int64_t bytes = 0;
    std::int64_t row_bytes = 0;  // recent bytes per row; 0 while none seen
  };
  Room FreeRoom() const;

  // The bytes the queue aims to hold when the sweeper refills it (its high
  // watermark; the sweeper is woken again at half of it): two claims of
  // `refill_rows` rows or a batch for each worker, whichever is more, at
  // `row_bytes` per row, at least 256 KiB; never above `bound`. Each refill is a write
  // transaction and an fsync, which the application's own writes wait for:
  // fewer rows per refill would trade memory for many more of them.
  static std::int64_t FillTarget(std::int64_t row_bytes, int refill_rows, int workers,
                                 int batch_max, std::int64_t bound);

  // Refuses further submissions and returns the queued leases nobody started.
  std::vector<store::Claimed> StopIntake();
  // Waits until no worker is busy or the deadline passes; true if idle.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline);
  // Joins the workers (after StopIntake; waits for running work).
  void Join();

  const std::string& name() const { return name_; }

 private:
  struct Queued {
    store::Claimed claimed;
    // On the first row of a run: how many rows (this one included) a worker
    // takes with it. 0 for a row that goes alone or in a batch.
    std::size_t run = 0;
  };

  // Under mutex_: queues rows from the front of `claimed` while they fit;
  // returns how many.
  std::size_t QueueWhileRoom(std::vector<store::Claimed>& claimed);
  void Loop(int index);
  // Under mutex_.
  bool HasRoomFor(std::int64_t bytes) const;
  static std::int64_t BytesOf(const store::Claimed& claimed);
  // Under mutex_.
  int FreeSlotsLocked() const;
  // Under mutex_: how many queued rows the next worker takes (a run whole,
  // else a batch bounded by batch_max_ rows and batch_bytes_).
  std::size_t NextTake() const;
  // Under mutex_: fill_bytes_ at the recent row size.
  void UpdateFillTarget();

  const std::string name_;
  const int workers_;
  const std::size_t capacity_;
  const std::int64_t capacity_bytes_;
  const int refill_rows_;
  const std::size_t batch_max_;
  const std::int64_t batch_bytes_;  // 0: no byte bound
  const Work work_;
  const std::function<void()> on_room_;

  mutable std::mutex mutex_;
  std::condition_variable ready_;     // work arrived or stopping
  std::condition_variable idle_;      // a worker finished
  std::deque<Queued> queue_;          // guarded by mutex_
  std::int64_t queued_bytes_ = 0;     // guarded by mutex_
  std::int64_t row_bytes_ = 0;        // recent bytes per row (0: none seen); guarded by mutex_
  int running_ = 0;                   // guarded by mutex_
  std::int64_t fill_bytes_;  // the high watermark in bytes; guarded by mutex_
  bool stopping_ = false;             // guarded by mutex_
  std::vector<std::thread> threads_;  // joined by Join()
};

}  // namespace outbox::agent
