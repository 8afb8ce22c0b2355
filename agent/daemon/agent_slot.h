// The agent that currently delivers, swapped on reload and taken out on stop.
// Thread-safe: every call into the agent from the HTTP threads happens under
// the mutex, so the daemon never stops or destroys an agent while a handler
// uses it. Internal to the daemon library.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "outbox/agent.h"
#include "prometheus.h"
#include "util/clock.h"

namespace outbox::daemon {

class AgentSlot {
 public:
  // Also forgets the reason MarkDown gave.
  void Put(std::unique_ptr<agent::Agent> agent);
  // The agent, or null; the slot is empty afterwards.
  std::unique_ptr<agent::Agent> Take();
  // The slot stays empty for `reason` (no configuration starts) until the
  // next Put.
  void MarkDown(std::string reason);
  // True when an agent is in the slot and running.
  bool Running() const;
  // One line for /healthz when Running() is false: "not running", or the
  // reason MarkDown gave.
  std::string WhyNotRunning() const;
  // The metrics in `format`, or nullopt when no agent is in the slot. Throws
  // what Agent::Snapshot throws (a failed database read).
  std::optional<std::string> RenderMetrics(agent::MetricsFormat format);
  // The agent's Snapshot(), or nullopt when no agent is in the slot. Throws
  // as Agent::Snapshot.
  std::optional<agent::MetricsSnapshot> Snapshot();
  // The agent's circuit breakers; none when no agent is in the slot.
  std::vector<agent::BreakerState> Breakers();
  // The agent's CheckLiveness(), or nullopt when no agent is in the slot.
  std::optional<agent::Liveness> CheckLiveness();

 private:
  // The counters count from here: they live as long as the daemon (reloads
  // keep them), and so does this slot. OpenMetrics' _created samples.
  const std::int64_t created_ms_ = util::NowMs();
  mutable std::mutex mutex_;
  std::unique_ptr<agent::Agent> agent_;  // guarded by mutex_
  std::string down_reason_;              // guarded by mutex_; "" = none given
};

}  // namespace outbox::daemon
