#include "probation.h"

#include <spdlog/logger.h>

#include <algorithm>

#include "util/printable.h"

namespace outbox::agent {

bool Probation::Step(const std::vector<std::pair<std::string, std::int64_t>>& quarantined,
                     std::int64_t now) {
  std::vector<std::pair<Route*, const std::string*>> ready;
  std::int64_t unrouted = 0;
  for (const auto& [topic, rows] : quarantined) {
    Route* route = routes_.For(topic);
    if (route == nullptr) {
      unrouted += rows;
      // Logged once per topic; capped against topics without end.
      if (unrouted_logged_.size() < 1000 && unrouted_logged_.insert(topic).second) {
        rt_.log->warn(
            "topic {} has {} rows taken back from a crashed agent but no route: they wait, "
            "blocking nothing, until a route sends them one at a time",
            util::EscapeControls(topic), rows);
      }
    } else if (route->breaker->IsClosed()) {
      ready.emplace_back(route, &topic);
    }
  }
  rt_.quarantined_unrouted.store(unrouted);
  rt_.probation.store(!ready.empty());
  if (ready.empty() || rt_.sending.load() > 0) return !ready.empty();  // a finish wakes us
  std::stable_sort(ready.begin(), ready.end(), [](const auto& a, const auto& b) {
    return a.first->options.priority > b.first->options.priority;
  });
  for (const auto& [route, topic] : ready) {
    std::vector<store::Claimed> claimed = ClaimAlone(*topic, now);
    if (!claimed.empty()) {
      dispatcher_.DispatchAll(std::move(claimed));
      break;
    }
    if (rt_.sending.load() > 0) break;
  }
  return true;
}

std::vector<store::Claimed> Probation::ClaimAlone(const std::string& topic, std::int64_t now) {
  std::vector<store::Claimed> claimed;
  rt_.writer->Run([&](store::Store& s) {
    claimed.clear();  // the transaction may be retried
    if (rt_.sending.load() > 0) return;
    claimed = s.ClaimDue(topic, rt_.owner, rt_.LeaseUntil(now), now, 1, /*quarantined_only=*/true);
  });
  claimed.resize(std::min<std::size_t>(claimed.size(), 1));
  return claimed;
}

}  // namespace outbox::agent
