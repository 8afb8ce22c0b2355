#include "breaker.h"

#include <algorithm>

namespace outbox::agent {

Breaker::Breaker(std::string endpoint, BreakerOptions options, std::shared_ptr<Clock> clock,
                 std::int64_t probe_timeout_ms)
    : endpoint_(std::move(endpoint)),
      options_(options),
      clock_(std::move(clock)),
      probe_timeout_(std::chrono::milliseconds(std::max<std::int64_t>(probe_timeout_ms, 1))),
      open_ms_(options.open_ms) {}

Breaker::Permit Breaker::Acquire() {
  std::lock_guard lock(mutex_);
  switch (mode_) {
    case Mode::kClosed:
      return Permit::kSend;
    case Mode::kGone:
      return Permit::kDenied;
    case Mode::kOpen:
      if (clock_->Monotonic() < open_until_) return Permit::kDenied;
      mode_ = Mode::kHalfOpen;
      probe_out_ = false;
      [[fallthrough]];
    case Mode::kHalfOpen: {
      const auto now = clock_->Monotonic();
      // A probe whose answer never came (its claim was reverted, the worker
      // stopped) must not keep the breaker half open forever.
      if (probe_out_ && now - probe_started_ < probe_timeout_) return Permit::kDenied;
      probe_out_ = true;
      probe_started_ = now;
      return Permit::kProbe;
    }
  }
  return Permit::kDenied;
}

bool Breaker::IsClosed() const {
  std::lock_guard lock(mutex_);
  return mode_ == Mode::kClosed;
}

bool Breaker::OnSuccess(std::int64_t wall_ms) {
  std::int64_t seen = last_ack_wall_ms_.load();
  while (seen < wall_ms && !last_ack_wall_ms_.compare_exchange_weak(seen, wall_ms)) {
  }
  std::lock_guard lock(mutex_);
  if (mode_ == Mode::kGone) return false;
  const bool reopened = mode_ != Mode::kClosed;
  mode_ = Mode::kClosed;
  consecutive_failures_ = 0;
  open_ms_ = options_.open_ms;
  probe_out_ = false;
  return reopened;
}

void Breaker::CancelProbe() {
  std::lock_guard lock(mutex_);
  probe_out_ = false;
}

bool Breaker::OnFailure(bool open_now) {
  std::lock_guard lock(mutex_);
  if (mode_ == Mode::kGone) return false;
  const auto now = clock_->Monotonic();
  if (mode_ == Mode::kHalfOpen) {
    // The probe failed: stay away twice as long.
    open_ms_ = std::min(options_.max_open_ms, open_ms_ * 2);
    mode_ = Mode::kOpen;
    open_until_ = now + std::chrono::milliseconds(open_ms_);
    probe_out_ = false;
    return true;
  }
  if (mode_ == Mode::kOpen) return false;  // answers of sends started before it opened
  ++consecutive_failures_;
  if (open_now || consecutive_failures_ >= options_.failure_threshold) {
    mode_ = Mode::kOpen;
    open_until_ = now + std::chrono::milliseconds(open_ms_);
    return true;
  }
  return false;
}

bool Breaker::MarkGone() {
  std::lock_guard lock(mutex_);
  const bool changed = mode_ != Mode::kGone;
  mode_ = Mode::kGone;
  return changed;
}

Breaker::Mode Breaker::mode() const {
  std::lock_guard lock(mutex_);
  return mode_;
}

BreakerState Breaker::State() const {
  std::lock_guard lock(mutex_);
  BreakerState state;
  state.endpoint = endpoint_;
  state.consecutive_failures = consecutive_failures_;
  switch (mode_) {
    case Mode::kClosed:
      state.state = "closed";
      break;
    case Mode::kOpen:
      state.state = "open";
      break;
    case Mode::kHalfOpen:
      state.state = "half_open";
      break;
    case Mode::kGone:
      state.state = "gone";
      break;
  }
  return state;
}

}  // namespace outbox::agent
