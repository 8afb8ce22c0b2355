#include "heartbeat.h"

#include <spdlog/logger.h>

#include <algorithm>
#include <cstdint>
#include <exception>

namespace outbox::daemon {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// STATUS= costs a read of the counts per topic (a scan of an index), so it
// is refreshed at this pace, not at every ping.
constexpr milliseconds kStatusEvery{15'000};

}  // namespace

Heartbeat::Heartbeat(ServiceNotifier& notifier, AgentSlot& slot,
                     std::shared_ptr<spdlog::logger> logger, milliseconds sweep_interval)
    : notifier_(notifier), slot_(slot), logger_(std::move(logger)),
      sweep_interval_(sweep_interval) {}

int Heartbeat::PollTimeoutMs() const {
  if (!notifier_.enabled()) return -1;
  milliseconds wait = kStatusEvery;
  // Twice per interval, as sd_watchdog_enabled(3) advises.
  if (notifier_.watchdog()) {
    wait = std::min(wait, duration_cast<milliseconds>(*notifier_.watchdog() / 2));
  }
  return static_cast<int>(std::max<std::int64_t>(1, wait.count()));
}

void Heartbeat::AgentChanged(milliseconds sweep_interval, std::string no_agent_reason) {
  sweep_interval_ = sweep_interval;
  no_agent_reason_ = std::move(no_agent_reason);
  next_status_ = {};
}

std::string Heartbeat::Stalled(SteadyClock::time_point now) {
  const std::optional<agent::Liveness> liveness = slot_.CheckLiveness();
  if (!liveness) return "";  // no agent: the loop that runs this is alive
  const auto watchdog = duration_cast<milliseconds>(*notifier_.watchdog());
  const auto writer_age = duration_cast<milliseconds>(now - liveness->writer);
  if (writer_age > watchdog) {
    return "the writer has not committed for " + std::to_string(writer_age.count()) +
           " ms (another connection holding the write lock?)";
  }
  const auto sweeper_age = duration_cast<milliseconds>(now - liveness->sweeper);
  if (sweeper_age > std::max(watchdog, 3 * sweep_interval_)) {
    return "the sweeper has not ended a pass for " + std::to_string(sweeper_age.count()) + " ms";
  }
  return "";
}

std::string Heartbeat::Summary() {
  if (!no_agent_reason_.empty()) return "no agent running: " + no_agent_reason_;
  try {
    const std::optional<agent::MetricsSnapshot> snapshot = slot_.Snapshot();
    if (!snapshot) return "no agent running";
    std::int64_t pending = 0;
    std::int64_t dead = 0;
    for (const store::TopicStatusCount& count : snapshot->db.counts) {
      if (count.status == store::Status::kPending) pending += count.count;
      if (count.status == store::Status::kDead) dead += count.count;
    }
    const auto open =
        std::count_if(snapshot->breakers.begin(), snapshot->breakers.end(),
                      [](const agent::BreakerState& b) { return b.state != "closed"; });
    return "delivering: pending " + std::to_string(pending) + ", dead " + std::to_string(dead) +
           ", breakers open " + std::to_string(open);
  } catch (const std::exception& e) {
    return std::string("cannot read the database: ") + e.what();
  }
}

void Heartbeat::Beat() {
  if (!notifier_.enabled()) return;
  const auto now = SteadyClock::now();
  if (notifier_.watchdog() && now >= next_ping_) {
    next_ping_ = now + *notifier_.watchdog() / 2;
    std::string stall;
    try {
      stall = Stalled(now);
    } catch (const std::exception& e) {
      stall = std::string("cannot ask the agent: ") + e.what();
    }
    if (stall.empty()) {
      notifier_.WatchdogPing();
      if (!last_stall_.empty()) logger_->info("watchdog: progress again; pinging");
    } else {
      if (last_stall_.empty()) logger_->error("watchdog: not pinging: {}", stall);
      notifier_.Status("stalled: " + stall);
      next_status_ = now + kStatusEvery;
    }
    last_stall_ = stall;
  }
  if (now >= next_status_) {
    next_status_ = now + kStatusEvery;
    notifier_.Status(Summary());
  }
}

}  // namespace outbox::daemon
