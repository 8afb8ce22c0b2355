#include "pool.h"

#include <algorithm>

#include "util/thread_name.h"

namespace outbox::agent {
namespace {

// The least the fill target asks for: a few large rows, or a whole row bound
// of small ones (1 000 rows of 256 bytes), so that small messages never wait
// for a measurement.
constexpr std::int64_t kFillFloorBytes = 256 * 1024;
// Weight of the past in the refill time: about the last 8 refills.
constexpr double kKeep = 0.875;
// The drain rate is measured over windows this long, each weighing half.
constexpr auto kRateWindow = std::chrono::milliseconds(100);

}  // namespace

std::int64_t WorkerPool::FillTarget(double drain_rate, double refill_seconds, std::int64_t floor,
                                    std::int64_t bound) {
  floor = std::min(floor, bound);
  if (drain_rate <= 0 || refill_seconds <= 0) return floor;
  const double wanted = 3.0 * drain_rate * refill_seconds;
  if (wanted >= static_cast<double>(bound)) return bound;
  return std::max(floor, static_cast<std::int64_t>(wanted));
}

WorkerPool::WorkerPool(std::string name, int workers, Capacity capacity, int batch_max, Work work,
                       std::function<void()> on_room)
    : name_(std::move(name)),
      workers_(std::max(1, workers)),
      capacity_(static_cast<std::size_t>(std::max(1, capacity.rows))),
      capacity_bytes_(std::max<std::int64_t>(1, capacity.bytes)),
      refill_rows_(std::max(1, capacity.refill_rows)),
      batch_max_(static_cast<std::size_t>(std::max(1, batch_max))),
      work_(std::move(work)),
      on_room_(std::move(on_room)),
      window_at_(std::chrono::steady_clock::now()),
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
    if (room_at_) {
      const double refill =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - *room_at_).count();
      // One stall (the sweeper held up behind a long write) moves the
      // estimate at most fourfold: a queue sized for it would hold most of
      // the byte bound every time.
      const double sample = refill_seconds_ == 0 ? refill : std::min(refill, 4 * refill_seconds_);
      refill_seconds_ =
          refill_seconds_ == 0 ? sample : kKeep * refill_seconds_ + (1 - kKeep) * sample;
      room_at_.reset();
    }
    refused_ = false;
    UpdateFillTarget();
  }
  return taken;
}

void WorkerPool::UpdateFillTarget() {
  // The sweeper, woken at half the target, should claim at least
  // refill_rows_ of the recent size, and each worker find a whole batch.
  const std::int64_t per_refill =
      std::max(2 * refill_rows_, static_cast<std::int64_t>(batch_max_) * workers_);
  const std::int64_t floor = std::max(kFillFloorBytes, per_refill * row_bytes_);
  fill_bytes_ = FillTarget(drain_rate_, refill_seconds_, floor, capacity_bytes_);
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
  if (rows == 0 || (!queue_.empty() && queued_bytes_ >= fill_bytes_)) {
    refused_ = true;  // the sweeper now waits for room: a refill starts then
    return 0;
  }
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
      std::size_t n = run ? queue_.front().run : 1;
      while (!run && n < batch_max_ && n < queue_.size() && queue_[n].run == 0) ++n;
      batch.clear();
      for (std::size_t i = 0; i < n; ++i) {
        queued_bytes_ -= BytesOf(queue_.front().claimed);
        window_bytes_ += BytesOf(queue_.front().claimed);
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
      const auto finished = std::chrono::steady_clock::now();
      if (finished - window_at_ >= kRateWindow) {
        // An idle spell inside the window lowers the rate: the target then
        // shrinks to what the traffic of the moment needs.
        const double rate = static_cast<double>(window_bytes_) /
                            std::chrono::duration<double>(finished - window_at_).count();
        drain_rate_ = drain_rate_ == 0 ? rate : (drain_rate_ + rate) / 2;
        window_bytes_ = 0;
        window_at_ = finished;
        UpdateFillTarget();
      }
      room = !stopping_ && queue_.size() <= capacity_ / 2 && queued_bytes_ <= fill_bytes_ / 2;
      if (room && refused_ && !room_at_) room_at_ = finished;
    }
    idle_.notify_all();
    if (room && on_room_) on_room_();
  }
}

}  // namespace outbox::agent
