#include "outcome.h"

#include <algorithm>
#include <limits>

#include "util/http_status.h"

namespace outbox::agent {
namespace {

// Reschedule, or dead once the attempts or the age budget are spent.
Decision RescheduleOrDead(const store::Row& row, const HandlerResult& result,
                          const store::RetryPolicy& topic_policy, std::int64_t now,
                          double unit_random, bool cost, std::string error) {
  Decision d;
  d.count_attempt = cost;
  const store::RetryPolicy policy = store::EffectivePolicy(topic_policy, row.retry);
  d.failures = AttemptsPlus(row.attempts, cost ? 1 : 0);
  if (cost && store::AttemptsExhausted(policy, d.failures)) {
    d.action = Action::kDead;
    d.dead_reason = store::dead_reason::kAttempts;
    d.error = TruncateError(error + " (after " + std::to_string(d.failures) + " attempts)");
    return d;
  }
  if (cost && store::AgeExhausted(policy, row.created_at, now)) {
    d.action = Action::kDead;
    d.dead_reason = store::dead_reason::kAge;
    d.error = TruncateError(error + " (older than retry.max_age_ms)");
    return d;
  }
  d.action = Action::kReschedule;
  d.delay_ms = store::RetryDelayMs(policy, std::max(1, d.failures), unit_random);
  if (result.retry_after_ms) {
    // The endpoint's own wish is a minimum, within our cap.
    d.delay_ms = std::max(d.delay_ms, std::min(*result.retry_after_ms, policy.max_interval_ms));
  }
  d.next_attempt_at = now + d.delay_ms;
  d.error = TruncateError(std::move(error));
  return d;
}

}  // namespace

std::string TruncateError(std::string text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::size_t cut = max_bytes;
  // Back up over continuation bytes (10xxxxxx) to the start of the sequence
  // the cut would split; at most 3 of them precede any lead byte.
  for (int i = 0; i < 3 && cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80;
       ++i) {
    --cut;
  }
  text.resize(cut);
  return text;
}

int AttemptsPlus(int attempts, int more) {
  const int base = std::max(0, attempts);
  return base > std::numeric_limits<int>::max() - more ? std::numeric_limits<int>::max()
                                                         : base + more;
}

bool IsConfigurationFailure(int status) { return util::IsConfigurationFailureStatus(status); }

std::string Describe(const HandlerResult& result) {
  if (!result.error.empty()) return TruncateError(result.error);
  if (result.http_status != 0) return "HTTP " + std::to_string(result.http_status);
  return "failed";
}

Decision Decide(const store::Row& row, const HandlerResult& result, const EndpointHealth& health,
                const store::RetryPolicy& topic_policy, std::int64_t now, double unit_random) {
  switch (result.outcome) {
    case Outcome::kDelivered:
      return Decision{};
    case Outcome::kMessageFailure:
      if (result.endpoint_gone) {
        // The endpoint retired; the message did nothing wrong.
        Decision d = RescheduleOrDead(row, result, topic_policy, now, unit_random, false,
                                      "HTTP 410: endpoint gone");
        d.endpoint_gone = true;
        return d;
      } else {
        Decision d;
        d.action = Action::kDead;
        d.dead_reason = store::dead_reason::kPermanent;
        d.count_attempt = true;
        d.failures = AttemptsPlus(row.attempts, 1);
        d.error = Describe(result);
        return d;
      }
    case Outcome::kEndpointFailure:
      break;
  }
  if (health.stopping) {
    Decision d;  // cut short by our own stop: not an attempt at all
    d.action = Action::kRevert;
    return d;
  }
  const bool configuration =
      result.configuration_failure || IsConfigurationFailure(result.http_status);
  // An attempt is the message's fault only if the endpoint acknowledged
  // some other message since this one's previous attempt; a probe, a 429
  // and a configuration failure never cost one.
  const std::int64_t since = row.last_attempt_at.value_or(row.created_at);
  const bool cost = health.breaker_closed && !configuration && result.http_status != 429 &&
                    health.last_ack_wall_ms > since;
  Decision d =
      RescheduleOrDead(row, result, topic_policy, now, unit_random, cost, Describe(result));
  d.endpoint_failure = true;
  d.configuration_failure = configuration;
  return d;
}

bool IsExpired(const store::Row& row, std::int64_t ttl_ms, std::int64_t now) {
  if (now < store::kSaneWallFloorMs) return false;
  if (row.expires_at) return *row.expires_at >= store::kSaneWallFloorMs && *row.expires_at <= now;
  // In doubles: created_at may hold anything another application wrote.
  return ttl_ms > 0 && row.created_at >= store::kSaneWallFloorMs &&
         static_cast<double>(row.created_at) + static_cast<double>(ttl_ms) <=
             static_cast<double>(now);
}

CompletionRetry DecideCompletionFailure(const store::Row& row,
                                        const store::RetryPolicy& topic_policy,
                                        std::string_view hook_error, std::int64_t now,
                                        double unit_random) {
  CompletionRetry r;
  const store::RetryPolicy policy = store::EffectivePolicy(topic_policy, row.retry);
  // Send attempts before the acknowledgement are not the hook's failures.
  r.failures = row.acked_at ? AttemptsPlus(row.attempts, 1) : 1;
  std::string error = "on_delivered failed: ";
  error.append(hook_error);
  if (store::AttemptsExhausted(policy, r.failures)) {
    r.dead = true;
    r.error = TruncateError(error + " (after " + std::to_string(r.failures) + " completions)");
    return r;
  }
  r.next_attempt_at = now + store::RetryDelayMs(policy, r.failures, unit_random);
  r.error = TruncateError(std::move(error));
  return r;
}

}  // namespace outbox::agent
