#include "agent_slot.h"

namespace outbox::daemon {

void AgentSlot::Put(std::unique_ptr<agent::Agent> agent) {
  std::lock_guard lock(mutex_);
  agent_ = std::move(agent);
  down_reason_.clear();
}

void AgentSlot::MarkDown(std::string reason) {
  std::lock_guard lock(mutex_);
  down_reason_ = std::move(reason);
}

std::string AgentSlot::WhyNotRunning() const {
  std::lock_guard lock(mutex_);
  return down_reason_.empty() ? "not running" : "not running: " + down_reason_;
}

std::unique_ptr<agent::Agent> AgentSlot::Take() {
  std::lock_guard lock(mutex_);
  return std::move(agent_);
}

bool AgentSlot::Running() const {
  std::lock_guard lock(mutex_);
  return agent_ != nullptr && agent_->Running();
}

std::optional<std::string> AgentSlot::RenderMetrics(agent::MetricsFormat format) {
  std::lock_guard lock(mutex_);
  if (agent_ == nullptr) return std::nullopt;
  return agent::RenderMetrics(agent_->Snapshot(), format, created_ms_);
}

std::optional<agent::MetricsSnapshot> AgentSlot::Snapshot() {
  std::lock_guard lock(mutex_);
  if (agent_ == nullptr) return std::nullopt;
  return agent_->Snapshot();
}

std::vector<agent::BreakerState> AgentSlot::Breakers() {
  std::lock_guard lock(mutex_);
  if (agent_ == nullptr) return {};
  return agent_->Breakers();
}

std::optional<agent::Liveness> AgentSlot::CheckLiveness() {
  std::lock_guard lock(mutex_);
  if (agent_ == nullptr || !agent_->Running()) return std::nullopt;
  return agent_->CheckLiveness();
}

}  // namespace outbox::daemon
