#include "dispatcher.h"

#include <algorithm>
#include <memory>

namespace outbox::agent {

void Dispatcher::DispatchAll(std::vector<store::Claimed> claimed) {
  std::vector<std::pair<Route*, std::vector<store::Claimed>>> groups;
  for (auto& c : claimed) {
    // lease_token counts claims: 1 means the agent sees this row first.
    if (c.lease.token == 1) rt_.metrics->Enqueued(c.topic);
    if (rt_.stopping.load()) {  // before For(): Stop() tears the routes down
      rt_.Revert(c.lease);
      continue;
    }
    Route* route = routes_.For(c.topic);
    if (route == nullptr) {
      rt_.Revert(c.lease);
      continue;
    }
    auto group = std::find_if(groups.begin(), groups.end(),
                              [route](const auto& g) { return g.first == route; });
    if (group == groups.end()) group = groups.insert(groups.end(), {route, {}});
    group->second.push_back(std::move(c));  // the row, payload included
  }
  for (auto& [route, items] : groups) {
    rt_.sending.fetch_add(static_cast<std::int64_t>(items.size()));
    GiveBack(*route, route->pool->TrySubmitAll(std::move(items)));
  }
}

void Dispatcher::ClaimCommitted(std::vector<store::EnqueuedRow> rows) {
  auto claimed = std::make_shared<std::vector<store::Claimed>>();
  rt_.writer->Submit(
      {[this, rows = std::move(rows), claimed](store::Store& s) {
         claimed->clear();  // the transaction may be retried
         // A stopping agent claims nothing new: its last write releases
         // whatever it still holds, and nothing may be claimed after it.
         // On probation a quarantined row goes alone: checked here, in the
         // transaction, since probation may have begun after the submit.
         if (rt_.stopping.load() || rt_.probation.load()) return;
         const std::int64_t now = rt_.clock->WallMs();
         for (const store::EnqueuedRow& row : rows) {
           // Read here, not on the caller's thread: the writer runs this
           // before Stop() tears the routes down (and it checked stopping).
           if (!row.topic.empty() && routes_.For(row.topic) == nullptr) continue;
           if (auto c = s.ClaimById(row.id, rt_.owner, rt_.LeaseUntil(now), now)) {
             claimed->push_back(std::move(*c));
           }
         }
       },
       [this, claimed] { DispatchEager(std::move(*claimed)); }});
}

void Dispatcher::DispatchEager(std::vector<store::Claimed> claimed) {
  std::vector<store::Claimed> ready;
  for (auto& c : claimed) {
    if (rt_.stopping.load()) {
      rt_.Revert(c.lease);
      continue;
    }
    Route* route = routes_.For(c.topic);
    // An open breaker means the sweeper decides when to try again.
    if (route != nullptr && !route->breaker->IsClosed()) {
      rt_.Revert(c.lease);
      continue;
    }
    ready.push_back(std::move(c));
  }
  DispatchAll(std::move(ready));
}

std::vector<store::Claimed> Dispatcher::Claim(store::Store& s, const std::string& topic,
                                              std::span<const std::string> ordering_keys) {
  if (rt_.stopping.load() || rt_.probation.load()) return {};
  const std::int64_t now = rt_.clock->WallMs();
  return s.ClaimNextOfKeys(topic, ordering_keys, rt_.owner, rt_.LeaseUntil(now), now);
}

void Dispatcher::DispatchRun(std::vector<store::Claimed> run) {
  if (run.empty()) return;
  for (const auto& c : run) {
    if (c.lease.token == 1) rt_.metrics->Enqueued(c.topic);
  }
  Route* route = rt_.stopping.load() ? nullptr : routes_.For(run.front().topic);
  if (route == nullptr || !route->breaker->IsClosed()) {
    for (const auto& c : run) rt_.Revert(c.lease);
    return;
  }
  rt_.sending.fetch_add(static_cast<std::int64_t>(run.size()));
  // The refused tail goes back: the head and the rows before them still
  // keep their order.
  GiveBack(*route, route->pool->TrySubmitRun(std::move(run)));
}

void Dispatcher::GiveBack(Route& route, const std::vector<store::Claimed>& rejected) {
  for (const auto& c : rejected) {
    rt_.sending.fetch_sub(1);
    rt_.metrics->PoolRejected(c.topic);
    route.backlog.store(true);
    rt_.Revert(c.lease);
  }
}

}  // namespace outbox::agent
