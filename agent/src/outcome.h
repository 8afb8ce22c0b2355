// What a send's result does to the row (docs/design.md "Outcomes" and
// "Runtime rules"): a pure function of the row, the handler's result, the
// endpoint's health, the retry policy and the time. No I/O, no locks; the
// delivery worker applies the decision. Not installed.
#pragma once

#include <cstdint>
#include <string>

#include "outbox/agent.h"

namespace outbox::agent {

// last_error is capped at this many bytes.
inline constexpr std::size_t kMaxErrorBytes = 1024;

// `text` cut to at most `max_bytes`, never inside a UTF-8 sequence.
std::string TruncateError(std::string text, std::size_t max_bytes = kMaxErrorBytes);

// A row's attempts plus `more`. Other applications may have written any
// number there: a negative one counts as none, and the sum saturates
// instead of overflowing.
int AttemptsPlus(int attempts, int more);

// An HTTP status that says the request itself is misconfigured (a rotated
// token, a wrong URL): the whole backlog would fail the same way.
bool IsConfigurationFailure(int status);

// The handler's error for last_error and logs: its text, else the status.
std::string Describe(const HandlerResult& result);

// The endpoint as the worker saw it just before the answer arrived.
struct EndpointHealth {
  bool breaker_closed = true;  // false: this send was a probe or raced an opening
  // The endpoint's last acknowledgement of anything, wall ms; 0 if never.
  std::int64_t last_ack_wall_ms = 0;
  bool stopping = false;  // our own stop cut the send short
};

enum class Action {
  kComplete,    // in flight → delivered
  kReschedule,  // in flight → pending, due at next_attempt_at
  kDead,        // in flight → dead
  kRevert,      // in flight → pending now, nothing counted
};

struct Decision {
  Action action = Action::kComplete;
  // The failure counts against the row's max_attempts (reschedule, dead).
  bool count_attempt = false;
  std::int64_t next_attempt_at = 0;  // kReschedule
  std::int64_t delay_ms = 0;         // kReschedule
  int failures = 0;                  // attempts after this one is counted
  std::string error;                 // for last_error, truncated
  std::string dead_reason;           // kDead: a store::dead_reason name
  // What the answer says about the endpoint, for its breaker.
  bool endpoint_gone = false;          // 410: send nothing more there
  bool endpoint_failure = false;       // counts toward opening the breaker
  bool configuration_failure = false;  // opens the breaker at once
};

// The outcome rules. `unit_random` in [0, 1) jitters the retry delay.
Decision Decide(const store::Row& row, const HandlerResult& result, const EndpointHealth& health,
                const store::RetryPolicy& topic_policy, std::int64_t now, double unit_random);

}  // namespace outbox::agent
