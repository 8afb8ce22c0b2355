// Retry policy maths (docs/design.md "Retry policy"). Pure functions.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "outbox/store.h"

namespace outbox::store {

std::string_view BackoffName(Backoff backoff) {
  return backoff == Backoff::kFixed ? "fixed" : "exponential";
}

std::optional<Backoff> ParseBackoff(std::string_view name) {
  if (name == "fixed") return Backoff::kFixed;
  if (name == "exponential") return Backoff::kExponential;
  return std::nullopt;
}

void Validate(const RetryPolicy& policy) {
  if (policy.first_interval_ms <= 0) {
    throw std::invalid_argument("retry.first_interval_ms: expected a positive integer");
  }
  if (policy.max_interval_ms < policy.first_interval_ms) {
    throw std::invalid_argument(
        "retry.max_interval_ms: must be at least retry.first_interval_ms");
  }
  if (policy.max_attempts < 1) {
    throw std::invalid_argument("retry.max_attempts: expected a positive integer");
  }
  if (!(policy.jitter >= 0.0 && policy.jitter <= 1.0)) {
    throw std::invalid_argument("retry.jitter: expected a number between 0 and 1");
  }
  if (policy.max_age_ms < 0) {
    throw std::invalid_argument("retry.max_age_ms: expected 0 (off) or a positive integer");
  }
}

RetryPolicy EffectivePolicy(const RetryPolicy& topic_default, const RetryOverride& row) {
  RetryPolicy policy = topic_default;
  if (row.max_attempts) policy.max_attempts = *row.max_attempts;
  if (row.backoff) policy.backoff = *row.backoff;
  if (row.first_interval_ms) policy.first_interval_ms = *row.first_interval_ms;
  // Rows written by other applications may carry nonsense; fall back to the
  // topic's value rather than computing with it.
  if (policy.max_attempts < 1) policy.max_attempts = topic_default.max_attempts;
  if (policy.first_interval_ms <= 0) policy.first_interval_ms = topic_default.first_interval_ms;
  return policy;
}

std::int64_t RetryDelayMs(const RetryPolicy& policy, int failures, double unit_random) {
  const double cap = static_cast<double>(policy.max_interval_ms);
  double delay = static_cast<double>(policy.first_interval_ms);
  if (policy.backoff == Backoff::kExponential && failures > 1) {
    // 2^(n-1) overflows a double only past n ≈ 1024; the cap applies long before.
    delay = std::min(cap, delay * std::exp2(std::min(failures - 1, 1023)));
  }
  delay = std::min(delay, cap);
  const double u = std::clamp(unit_random, 0.0, 1.0);
  delay *= 1.0 + policy.jitter * (2.0 * u - 1.0);
  return static_cast<std::int64_t>(std::clamp(delay, 0.0, cap));
}

bool AttemptsExhausted(const RetryPolicy& policy, int failures) {
  return failures >= policy.max_attempts;
}

bool AgeExhausted(const RetryPolicy& policy, std::int64_t created_at_ms, std::int64_t now_ms) {
  // Compared without subtracting created_at: a row may carry any value
  // there, and now - INT64_MIN overflows.
  if (policy.max_age_ms <= 0) return false;
  // Before the floor a time is no date (docs/design.md, "Clocks"): the age
  // is unknown, and a clock that jumps from 1970 to today must not make
  // every row older than its budget at once.
  if (created_at_ms < kSaneWallFloorMs || now_ms < kSaneWallFloorMs) return false;
  return created_at_ms < now_ms - policy.max_age_ms;
}

bool IsDue(std::int64_t next_attempt_at_ms, std::int64_t now_ms, std::int64_t max_interval_ms) {
  if (next_attempt_at_ms <= now_ms) return true;
  // Further ahead than any delay could be: the clock was set back after the
  // row was scheduled. Waiting for it could take years.
  return next_attempt_at_ms - now_ms > max_interval_ms;
}

}  // namespace outbox::store
