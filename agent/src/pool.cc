#include "pool.h"

#include <algorithm>

#include "util/thread_name.h"

namespace outbox::agent {

WorkerPool::WorkerPool(std::string name, int workers, Capacity capacity, int batch_max, Work work,
                       std::function<void()> on_room)
    : name_(std::move(name)),
      capacity_(static_cast<std::size_t>(std::max(1, capacity.rows))),
      capacity_bytes_(std::max<std::int64_t>(1, capacity.bytes)),
      batch_max_(static_cast<std::size_t>(std::max(1, batch_max))),
      work_(std::move(work)),
      on_room_(std::move(on_room)) {
  threads_.reserve(static_cast<std::size_t>(workers));
  for (int i = 0; i < std::max(1, workers); ++i) {
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

std::vector<store::Claimed> WorkerPool::TrySubmitAll(std::vector<store::Claimed> claimed) {
  std::size_t taken = 0;
  {
    std::lock_guard lock(mutex_);
    std::int64_t taken_bytes = 0;
    while (!stopping_ && taken < claimed.size()) {
      const std::int64_t bytes = BytesOf(claimed[taken]);
      if (!HasRoomFor(bytes)) break;
      queued_bytes_ += bytes;
      taken_bytes += bytes;
      queue_.push_back(std::move(claimed[taken]));
      ++taken;
    }
    if (taken > 0) {
      // Half the old estimate, half this group: follows a change of payload
      // sizes within a claim or two.
      const std::int64_t mean = taken_bytes / static_cast<std::int64_t>(taken);
      row_bytes_ = row_bytes_ == 0 ? mean : (row_bytes_ + mean) / 2;
    }
  }
  if (taken == 1) {
    ready_.notify_one();
  } else if (taken > 1) {
    ready_.notify_all();
  }
  claimed.erase(claimed.begin(), claimed.begin() + static_cast<std::ptrdiff_t>(taken));
  return claimed;
}

int WorkerPool::FreeSlots() const {
  std::lock_guard lock(mutex_);
  if (stopping_ || (!queue_.empty() && queued_bytes_ >= capacity_bytes_)) return 0;
  const auto rows = static_cast<std::int64_t>(capacity_ - std::min(capacity_, queue_.size()));
  if (row_bytes_ <= 0) return static_cast<int>(rows);
  // Rows of the size seen lately that fit the byte bound: claiming more would
  // hold their payloads in memory only to give them back (each revert a
  // write) when TrySubmitAll refuses them.
  const std::int64_t by_bytes = std::max<std::int64_t>(1, (capacity_bytes_ - queued_bytes_) / row_bytes_);
  return static_cast<int>(std::min(rows, by_bytes));
}

std::vector<store::Claimed> WorkerPool::StopIntake() {
  std::vector<store::Claimed> unstarted;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    unstarted.assign(std::make_move_iterator(queue_.begin()),
                     std::make_move_iterator(queue_.end()));
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
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and nothing left
      const std::size_t n = std::min(batch_max_, queue_.size());
      batch.assign(std::make_move_iterator(queue_.begin()),
                   std::make_move_iterator(queue_.begin() + static_cast<std::ptrdiff_t>(n)));
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
      for (const store::Claimed& claimed : batch) queued_bytes_ -= BytesOf(claimed);
      ++running_;
    }
    work_(index, batch);  // catches everything itself: no exception crosses a thread
    bool room = false;
    {
      std::lock_guard lock(mutex_);
      --running_;
      room = !stopping_ && queue_.size() <= capacity_ / 2 && queued_bytes_ <= capacity_bytes_ / 2;
    }
    idle_.notify_all();
    if (room && on_room_) on_room_();
  }
}

}  // namespace outbox::agent
