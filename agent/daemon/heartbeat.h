// The daemon loop's duty toward the service manager (docs/operations.md,
// "Watchdog"): WATCHDOG=1 only while the agent's writer commits and its
// sweeper ends passes, so that a writer stuck behind another connection's
// lock or a wedged sweeper stops the pings and systemd restarts outboxd; and
// a STATUS= line (pending, dead, breakers open) refreshed now and then.
// While no agent runs (a stop, or a reload that could not start one), the
// loop itself is the evidence: it pings, and STATUS= says why no agent runs.
// Used by the thread that runs Daemon::Wait() only.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "agent_slot.h"
#include "service_notify.h"

namespace spdlog {
class logger;
}

namespace outbox::daemon {

class Heartbeat {
 public:
  // `sweep_interval`: the agent's pause between sweeper passes; a sweeper
  // counts as wedged only after max(watchdog, 3 passes) without one.
  Heartbeat(ServiceNotifier& notifier, AgentSlot& slot, std::shared_ptr<spdlog::logger> logger,
            std::chrono::milliseconds sweep_interval);

  // How long the loop may wait before calling Beat(): -1 (forever) when the
  // manager wants neither pings nor status.
  int PollTimeoutMs() const;
  // Pings and refreshes STATUS= when their time has come. Never throws.
  void Beat();
  // The agent changed (a reload): its interval and, with no agent, why.
  void AgentChanged(std::chrono::milliseconds sweep_interval, std::string no_agent_reason = "");
  // One STATUS= line now (pending, dead, breakers open; or the reason).
  std::string Summary();

 private:
  // "" when the writer and the sweeper made progress recently enough, else why not.
  std::string Stalled(std::chrono::steady_clock::time_point now);

  ServiceNotifier& notifier_;
  AgentSlot& slot_;
  std::shared_ptr<spdlog::logger> logger_;
  std::chrono::milliseconds sweep_interval_;
  std::string no_agent_reason_;
  std::chrono::steady_clock::time_point next_ping_{};
  std::chrono::steady_clock::time_point next_status_{};
  std::string last_stall_;  // logged once per stall, not once per beat
};

}  // namespace outbox::daemon
