#include "runtime_state.h"

#include <string_view>

namespace outbox::agent {
namespace {

// JSON string contents; endpoints and topics are the agent's own config or
// UTF-8 labels, but quotes and control bytes must still not break the JSON.
std::string Escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> RuntimeStatePublisher::State(
    std::int64_t now_ms) const {
  std::vector<std::pair<std::string, std::string>> state;
  state.emplace_back("lease_timeout_ms", std::to_string(rt_.options.lease_timeout_ms));
  state.emplace_back("retention.delivered_ms",
                     std::to_string(rt_.options.retention.delivered_ms));
  state.emplace_back("last_sweep", std::to_string(now_ms));
  std::string breakers = "[";
  for (const BreakerState& breaker : routes_.BreakerStates()) {
    if (breakers.size() > 1) breakers += ',';
    breakers += "{\"endpoint\":\"" + Escape(breaker.endpoint) + "\",\"state\":\"" +
                Escape(breaker.state) +
                "\",\"consecutive_failures\":" + std::to_string(breaker.consecutive_failures) + "}";
  }
  state.emplace_back("breakers", breakers + "]");
  // Counters per topic label: outboxctl top turns two readings into rates.
  std::string delivered = "{";
  for (const auto& [label, counters] : rt_.metrics->Snapshot().topics) {
    if (delivered.size() > 1) delivered += ',';
    // Appended piece by piece: g++ 12 at -O3 warns falsely (-Wrestrict) on
    // a literal + std::string chain here.
    delivered += '"';
    delivered += Escape(label);
    delivered += "\":";
    delivered += std::to_string(counters.delivered);
  }
  state.emplace_back("delivered_total", delivered + "}");
  return state;
}

void RuntimeStatePublisher::MaybePublish() {
  const auto now = std::chrono::steady_clock::now();
  const bool first = last_ == std::chrono::steady_clock::time_point{};
  if (!first && now - last_ < kMinInterval) return;
  const std::int64_t wall = rt_.clock->WallMs();
  const auto state = State(wall);
  auto compared = state;
  std::erase_if(compared, [](const auto& entry) { return entry.first == "last_sweep"; });
  if (!first && compared == published_ && now - last_ < kHeartbeat) return;
  rt_.writer->Run([&](store::Store& s) { store::Operator(s).PublishRuntime(rt_.owner, state, wall); });
  last_ = now;
  published_ = std::move(compared);
}

}  // namespace outbox::agent
