// Sends claimed rows through their route's handler (one at a time or as a
// batch, halving a refused batch) and applies the outcome. Not installed.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
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
  // throws: a failure gives the whole batch back. With `run`, the rows are a
  // run of one ordering key (Store::ClaimRunAfter), sent as WorkRun says.
  void Work(Route& route, int index, std::vector<store::Claimed>& batch, bool run = false);

  // Most rows a run holds, and most bytes of payload and headers after its
  // first row; a pool's own bounds (queue_capacity, free slots, queue_bytes)
  // cap them further.
  static constexpr int kRunMaxRows = 1024;
  static constexpr std::int64_t kRunMaxBytes = 512 * 1024;

 private:
  // A leased row loaded for sending.
  struct Loaded {
    store::Lease lease;
    store::Row row;
    transport::Headers headers;
    std::string message_id;
    // Whether its outcome also claims the next run of its ordering key:
    // false for a row of a run that has more rows after it.
    bool claim_next = true;
    std::optional<std::int64_t> lease_boot_until{};  // Claimed::lease_boot_until
  };

  // A run grows only while its key is all the route has to do: nothing
  // queued and no other worker busy. With many keys, one row per key keeps
  // every worker going, and a run would leave its key's later rows pending
  // behind it, which every sweeper claim pass walks and rejects (benchmark
  // figure 8a fell from 0.8 to 0.2 when every key ran).
  static bool Alone(const Route& route);
  // A single row of an ordered key that may become a run (see Alone).
  bool StartsRun(const Route& route, const std::vector<store::Claimed>& batch) const;
  // What the worker sending a run shares with the writer task growing it.
  struct RunFeed;

  // Sends a run strictly one row after another: each row only once the
  // receiver acknowledged the one before it (at most one message of the key
  // on the wire), its completion handed to the writer without waiting for
  // the commit. While it sends, it grows the run (Store::ClaimRunAfter) so
  // that the next rows' claim commits meanwhile. Stopping, or a row whose
  // lease lapsed, ends the run; a row that is not delivered ends it too.
  // Whatever ends it hands the unsent rows back (no attempt counted) in a
  // write queued before the ending row's own outcome. Only a row sent with
  // nothing left in hand claims the key's next row (Writer::Task::claim_next).
  void WorkRun(Route& route, std::vector<store::Claimed>& run);
  // One row of a run. True when it was delivered; false when it ended the
  // run (having called `end_run` before queuing its outcome).
  bool SendInRun(Route& route, store::Claimed& claimed, bool last,
                 const std::function<void()>& end_run);
  // Queues the claim of up to `rows` rows after `last` for `feed`.
  void GrowRun(const std::shared_ptr<RunFeed>& feed, const store::Lease& last,
               const std::string& topic, const std::string& ordering_key, int rows,
               std::int64_t bytes);
  // Rows claimed and never sent → pending, in one write.
  void HandBack(std::vector<store::Lease> leases);
  // A route's bounds on a run: rows and bytes.
  static int RunRows(const Route& route);
  static std::int64_t RunBytes(const Route& route);
  static Delivery ToDelivery(const Loaded& item);
  // The handler's answer; an exception becomes an endpoint failure.
  static HandlerResult SafeHandle(Route& route, std::span<const Delivery> deliveries);
  // The handler's pre-check; an exception means "not done".
  static bool SafeAlreadyDone(Handler& handler, const Delivery& delivery);

  void Send(Route& route, std::span<Loaded> items);
  // Waits for the route's rate limit to allow `items`; false (rows given
  // back to pending) when the agent stops meanwhile or a lease lapsed.
  bool AwaitRate(Route& route, std::span<Loaded> items);
  // What one request's `result` does: one breaker event for the request and
  // one decision per member, all judged on the endpoint as it was before.
  void Resolve(Route& route, std::span<Loaded> items, const HandlerResult& result);
  // The breaker's part of a request's outcome (and its log line).
  void NoteEndpointEvent(Route& route, const Decision& decision, const EndpointHealth& health,
                         const HandlerResult& result);
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
