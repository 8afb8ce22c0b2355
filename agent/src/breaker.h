// A circuit breaker per endpoint (docs/design.md "Runtime rules").
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "outbox/agent.h"

namespace outbox::agent {

// closed: send; after failure_threshold consecutive endpoint failures (or at
// once for an auth/URL problem) it opens for open_ms, doubling per failed
// probe up to max_open_ms; then one probe goes out (half open) and its
// success closes the breaker. gone (410): nothing more until a reload.
// Thread-safe.
class Breaker {
 public:
  Breaker(std::string endpoint, BreakerOptions options, std::shared_ptr<Clock> clock,
          std::int64_t probe_timeout_ms);

  enum class Permit { kSend, kProbe, kDenied };
  // What the sweeper may claim for this endpoint now: anything, exactly one
  // probe (which is then reserved), or nothing.
  Permit Acquire();
  // Whether sending is allowed without a probe (the eager path's test).
  bool IsClosed() const;

  // Returns true if this success closed an open or half-open breaker.
  bool OnSuccess(std::int64_t wall_ms);
  // The reserved probe found nothing to send.
  void CancelProbe();
  // Returns true if this failure changed the state (for a log line).
  bool OnFailure(bool open_now);
  // 410: nothing more is sent. Returns true if the breaker was not gone yet.
  bool MarkGone();

  enum class Mode { kClosed, kOpen, kHalfOpen, kGone };
  Mode mode() const;

  // The last time the endpoint acknowledged anything, wall ms; 0 if never
  // since this process started. Feeds the outage accounting.
  std::int64_t last_ack_wall_ms() const { return last_ack_wall_ms_.load(); }
  BreakerState State() const;
  const std::string& endpoint() const { return endpoint_; }

 private:
  using TimePoint = std::chrono::steady_clock::time_point;

  const std::string endpoint_;
  const BreakerOptions options_;
  const std::shared_ptr<Clock> clock_;
  const std::chrono::milliseconds probe_timeout_;

  mutable std::mutex mutex_;
  Mode mode_ = Mode::kClosed;       // guarded by mutex_
  int consecutive_failures_ = 0;    // guarded by mutex_
  std::int64_t open_ms_ = 0;        // guarded by mutex_: current open period
  TimePoint open_until_{};          // guarded by mutex_
  TimePoint probe_started_{};       // guarded by mutex_
  bool probe_out_ = false;          // guarded by mutex_
  std::atomic<std::int64_t> last_ack_wall_ms_{0};
};

}  // namespace outbox::agent
