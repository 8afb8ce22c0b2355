// What every part of a running agent shares: its options, seams, the writer
// and the few flags that coordinate the threads. Not installed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <stop_token>
#include <string>

#include "outbox/agent.h"
#include "writer.h"

namespace outbox::agent {

// A wake-up the sweeper waits on: a commit, a breaker that closed, a pool
// with room again. Outlives the sweeper thread, so that a late worker's
// Notify() is harmless. Thread-safe.
class Wakeup {
 public:
  void Notify() {
    {
      std::lock_guard lock(mutex_);
      flag_ = true;
    }
    cv_.notify_one();
  }
  // Returns at `deadline`, on a stop request, or after a Notify() (which it
  // consumes).
  void WaitUntil(std::stop_token stop, std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    cv_.wait_until(lock, stop, deadline, [this] { return flag_; });
    flag_ = false;
  }

 private:
  std::mutex mutex_;
  std::condition_variable_any cv_;
  bool flag_ = false;  // guarded by mutex_
};

// Owned by the Agent; every part holds a reference. The plain fields are set
// by the constructor and only read afterwards; the atomics coordinate threads.
struct Runtime {
  Options options;
  std::shared_ptr<Clock> clock;
  std::shared_ptr<spdlog::logger> log;
  std::shared_ptr<Metrics> metrics;
  std::string owner;
  store::Options store_options;
  std::unique_ptr<Writer> writer;
  std::string database_id;

  std::atomic<bool> stopping{false};
  // Rows taken back from a crashed agent are being resent one at a time
  // (Probation): nothing else is claimed meanwhile. Claims made on the
  // writer check it inside their transaction.
  std::atomic<bool> probation{false};
  // Rows handed to a pool and not yet finished sending.
  std::atomic<std::int64_t> sending{0};
  // Topics with pending rows but no route, as of the last sweep.
  std::atomic<std::int64_t> unrouted_pending{0};
  // Quarantined rows whose topic has no route, as of the last sweep: they
  // wait and hold nothing up (Probation).
  std::atomic<std::int64_t> quarantined_unrouted{0};
  Wakeup wakeup;

  // Waits until `deadline` (true) or until the agent stops (false): the
  // rate limit's pause, which a stop must not sit out.
  bool PauseUntil(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(pause_mutex_);
    return !pause_cv_.wait_until(lock, deadline, [this] { return stopping.load(); });
  }
  // Ends every PauseUntil (after stopping was set).
  void EndPauses() {
    { std::lock_guard lock(pause_mutex_); }
    pause_cv_.notify_all();
  }

  std::int64_t LeaseUntil(std::int64_t now) const { return now + options.lease_timeout_ms; }

  // Gives a claimed row back to pending at once, no attempt counted.
  void Revert(const store::Lease& lease) {
    writer->Submit({[this, lease](store::Store& s) { s.Revert(lease, clock->WallMs()); }, {}});
  }

  // `n` rows handed to a pool are finished; the last one lets probation go on.
  void NoteSent(std::int64_t n) {
    if (sending.fetch_sub(n) == n && probation.load()) wakeup.Notify();
  }

  // Uniform in [0, 1): the jitter of retry delays.
  double Unit() {
    std::lock_guard lock(random_mutex_);
    return std::uniform_real_distribution<double>(0.0, 1.0)(random_);
  }

 private:
  std::mutex pause_mutex_;
  std::condition_variable pause_cv_;
  std::mutex random_mutex_;
  std::mt19937_64 random_{std::random_device{}()};  // guarded by random_mutex_
};

}  // namespace outbox::agent
