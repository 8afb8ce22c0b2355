// Sends claimed rows through their route's handler (one at a time or as a
// batch, halving a refused batch) and applies the outcome. Not installed.
#pragma once

#include <span>
#include <vector>

#include "dispatcher.h"
#include "outcome.h"
#include "route_table.h"
#include "runtime.h"

namespace outbox::agent {

// Stateless; Work() runs concurrently on every worker thread of every route.
class DeliveryWorker {
 public:
  // `dispatcher` takes the next row of an ordering key that a completion
  // claimed (docs/ordering.md); null: such rows wait for the sweeper.
  explicit DeliveryWorker(Runtime& runtime, Dispatcher* dispatcher = nullptr)
      : rt_(runtime), dispatcher_(dispatcher) {}

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
  void Apply(Route& route, Loaded& item, const Decision& decision, std::int64_t now,
             const HandlerResult& result);
  // `answer` is null when nothing was sent: the pre-check found the effect
  // done, or the row was acknowledged earlier and only its completion is
  // retried.
  void FinishDelivered(Route& route, std::span<Loaded> items, const HandlerResult* answer);
  void FinishDead(Route& route, const Loaded& item, const std::string& error, bool count_attempt,
                  std::string reason);
  void FinishExpired(Route& route, const Loaded& item);
  // Submits `task` (the row's outcome) to the writer. When the row's topic
  // orders by key and the row has a key, the same transaction then claims
  // the key's next row, which goes out once it commits: a successor is sent
  // as soon as its predecessor is done, not at the next sweep.
  void SubmitOutcome(Route& route, const Loaded& item, Writer::Task task);

  Runtime& rt_;
  Dispatcher* dispatcher_;
};

}  // namespace outbox::agent
