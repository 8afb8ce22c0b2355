#include "pool.h"

#include <algorithm>

#include "util/thread_name.h"

namespace outbox::agent {
namespace {

// The least the fill target asks for: a whole row bound of small rows (1 000
// of 256 bytes).
constexpr std::int64_t kFillFloorBytes = 256 * 1024;

}  // namespace

std::int64_t WorkerPool::FillTarget(std::int64_t row_bytes, int refill_rows, int workers,
                                    int batch_max, std::int64_t bound) {
  const std::int64_t rows =
      std::max<std::int64_t>(2 * static_cast<std::int64_t>(refill_rows),
                             static_cast<std::int64_t>(workers) * batch_max);
  return std::min(bound, std::max(kFillFloorBytes, rows * std::max<std::int64_t>(0, row_bytes)));
}

WorkerPool::WorkerPool(std::string name, int workers, Capacity capacity, int batch_max, Work work,
                       std::function<void()> on_room)
    : name_(std::move(name)),
      workers_(std::max(1, workers)),
      capacity_(static_cast<std::size_t>(std::max(1, capacity.rows))),
      capacity_bytes_(std::max<std::int64_t>(1, capacity.bytes)),
      refill_rows_(std::max(1, capacity.refill_rows)),
      batch_max_(static_cast<std::size_t>(std::max(1, batch_max))),
      batch_bytes_(std::max<std::int64_t>(0, capacity.batch_bytes)),
      work_(std::move(work)),
      on_room_(std::move(on_room)),
      fill_bytes_(std::min(kFillFloorBytes, capacity_bytes_)) {
  threads_.reserve(static_cast<std::size_t>(workers_));
  for (int i = 0; i < workers_; ++i) {
    threads_.emplace_back([this, i] { Loop(i); });
  }
}

WorkerPool::~WorkerPool() {
  StopIntake();
  Join();
}

std::int64_t WorkerPool::BytesOf(const store::Claimed& claimed) {
  return static_cast<std::int64_t>(claimed.row.payload.size() +
                                   (claimed.row.headers_json ? claimed.row.headers_json->size() : 0));
}

bool WorkerPool::HasRoomFor(std::int64_t bytes) const {
  if (queue_.size() >= capacity_) return false;
  return queue_.empty() || queued_bytes_ + bytes <= capacity_bytes_;
}

std::size_t WorkerPool::QueueWhileRoom(std::vector<store::Claimed>& claimed) {
  std::size_t taken = 0;
  std::int64_t taken_bytes = 0;
  while (!stopping_ && taken < claimed.size()) {
    const std::int64_t bytes = BytesOf(claimed[taken]);
    if (!HasRoomFor(bytes)) break;
    queued_bytes_ += bytes;
    taken_bytes += bytes;
    queue_.push_back({std::move(claimed[taken]), 0});
    ++taken;
  }
  if (taken > 0) {
    // Half the old estimate, half this group: follows a change of payload
    // sizes within a claim or two.
    const std::int64_t mean = taken_bytes / static_cast<std::int64_t>(taken);
    row_bytes_ = row_bytes_ == 0 ? mean : (row_bytes_ + mean) / 2;
    UpdateFillTarget();
  }
  return taken;
}

void WorkerPool::UpdateFillTarget() {
  fill_bytes_ = FillTarget(row_bytes_, refill_rows_, workers_, static_cast<int>(batch_max_),
                           capacity_bytes_);
}

std::vector<store::Claimed> WorkerPool::TrySubmitAll(std::vector<store::Claimed> claimed) {
  std::size_t taken = 0;
  {
    std::lock_guard lock(mutex_);
    taken = QueueWhileRoom(claimed);
  }
  if (taken == 1) {
    ready_.notify_one();
  } else if (taken > 1) {
    ready_.notify_all();
  }
  claimed.erase(claimed.begin(), claimed.begin() + static_cast<std::ptrdiff_t>(taken));
  return claimed;
}

std::vector<store::Claimed> WorkerPool::TrySubmitRun(std::vector<store::Claimed> run) {
  std::size_t taken = 0;
  {
    std::lock_guard lock(mutex_);
    const std::size_t first = queue_.size();
    // The first row takes the place its key's previous row left in the
    // queue: a full queue must not send a key back to the sweeper for want
    // of one slot (the queue then holds at most one row per worker more).
    if (!stopping_ && !run.empty() && !HasRoomFor(BytesOf(run.front()))) {
      queued_bytes_ += BytesOf(run.front());
      queue_.push_back({std::move(run.front()), 0});
      run.erase(run.begin());
      taken = 1;
    }
    const std::size_t more = QueueWhileRoom(run);
    run.erase(run.begin(), run.begin() + static_cast<std::ptrdiff_t>(more));
    taken += more;
    // One row goes as any other (a batch may take it along).
    if (taken > 1) queue_[first].run = taken;
  }
  if (taken > 0) ready_.notify_one();  // one worker takes it all
  return run;
}

int WorkerPool::Load() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(queue_.size()) + running_;
}

int WorkerPool::FreeSlots() const {
  std::lock_guard lock(mutex_);
  return FreeSlotsLocked();
}

int WorkerPool::FreeSlotsLocked() const {
  if (stopping_) return 0;
  const auto rows = static_cast<std::int64_t>(capacity_ - std::min(capacity_, queue_.size()));
  if (rows == 0 || (!queue_.empty() && queued_bytes_ >= fill_bytes_)) return 0;
  if (row_bytes_ <= 0) return static_cast<int>(rows);
  // Rows of the size seen lately up to the fill target: more would hold
  // payloads in memory that the workers do not need before the next refill
  // (and beyond the byte bound, TrySubmitAll would refuse them, each revert
  // a write).
  const std::int64_t by_bytes =
      std::max<std::int64_t>(1, (fill_bytes_ - queued_bytes_) / row_bytes_);
  return static_cast<int>(std::min(rows, by_bytes));
}

WorkerPool::Room WorkerPool::FreeRoom() const {
  std::lock_guard lock(mutex_);
  Room room;
  room.rows = FreeSlotsLocked();
  if (room.rows > 0) {
    room.bytes = queue_.empty() ? std::max(fill_bytes_, row_bytes_)
                                : std::max<std::int64_t>(0, fill_bytes_ - queued_bytes_);
  }
  room.row_bytes = row_bytes_;
  return room;
}

std::vector<store::Claimed> WorkerPool::StopIntake() {
  std::vector<store::Claimed> unstarted;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    unstarted.reserve(queue_.size());
    for (Queued& queued : queue_) unstarted.push_back(std::move(queued.claimed));
    queue_.clear();
    queued_bytes_ = 0;
  }
  ready_.notify_all();
  return unstarted;
}

bool WorkerPool::WaitIdle(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  return idle_.wait_until(lock, deadline, [this] { return running_ == 0 && queue_.empty(); });
}

void WorkerPool::Join() {
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

std::size_t WorkerPool::NextTake() const {
  if (queue_.front().run > 0) return queue_.front().run;
  // A batch stops before the next run, at batch_max_ rows, and before the
  // row that would take its payloads past batch_bytes_ (the endpoint would
  // refuse such a request unsent); its first row goes even when larger.
  std::int64_t payload = static_cast<std::int64_t>(queue_.front().claimed.row.payload.size());
  std::size_t n = 1;
  while (n < batch_max_ && n < queue_.size() && queue_[n].run == 0) {
    const auto next = static_cast<std::int64_t>(queue_[n].claimed.row.payload.size());
    if (batch_bytes_ > 0 && payload + next > batch_bytes_) break;
    payload += next;
    ++n;
  }
  return n;
}

void WorkerPool::Loop(int index) {
  util::NameThisThread("ob:" + name_);
  std::vector<store::Claimed> batch;
  bool run = false;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and nothing left
      // A run goes whole to one worker; a batch stops before the next run.
      run = queue_.front().run > 0;
      const std::size_t n = NextTake();
      batch.clear();
      for (std::size_t i = 0; i < n; ++i) {
        queued_bytes_ -= BytesOf(queue_.front().claimed);
        batch.push_back(std::move(queue_.front().claimed));
        queue_.pop_front();
      }
      ++running_;
    }
    work_(index, batch, run);  // catches everything itself: no exception crosses a thread
    bool room = false;
    {
      std::lock_guard lock(mutex_);
      --running_;
      room = !stopping_ && queue_.size() <= capacity_ / 2 && queued_bytes_ <= fill_bytes_ / 2;
    }
    idle_.notify_all();
    if (room && on_room_) on_room_();
  }
}

}  // namespace outbox::agent
