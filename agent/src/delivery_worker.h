// Sends claimed rows through their route's handler (one at a time or as a
// batch, halving a refused batch) and applies the outcome. Not installed.
#pragma once

#include <span>
#include <vector>

#include "outcome.h"
#include "route_table.h"
#include "runtime.h"

namespace outbox::agent {

// Stateless; Work() runs concurrently on every worker thread of every route.
class DeliveryWorker {
 public:
  explicit DeliveryWorker(Runtime& runtime) : rt_(runtime) {}

  // A pool's work function: sends the claimed rows (the claim returned
  // them, payload included) and hands the outcomes to the writer. Never
  // throws: a failure gives the whole batch back.
  void Work(Route& route, int index, std::vector<store::Claimed>& batch);

 private:
  // A leased row loaded for sending.
  struct Loaded {
    store::Lease lease;
    store::Row row;
    transport::Headers headers;
    std::string message_id;
  };

  void Send(Route& route, std::span<Loaded> items);
  // Waits for the route's rate limit to allow `items`; false (rows given
  // back to pending) when the agent stops meanwhile or a lease lapsed.
  bool AwaitRate(Route& route, std::span<Loaded> items);
  void Resolve(Route& route, Loaded& item, const HandlerResult& result);
  void Apply(Route& route, Loaded& item, const Decision& decision, std::int64_t now);
  void FinishDelivered(Route& route, std::span<Loaded> items);
  void FinishDead(const Loaded& item, const std::string& error, bool count_attempt,
                  const std::string& dead_reason);

  Runtime& rt_;
};

}  // namespace outbox::agent
