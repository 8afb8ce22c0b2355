// Hands claimed rows to their route's pool, and the eager path's claims.
// Not installed.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "route_table.h"
#include "runtime.h"
#include "writer.h"

namespace outbox::agent {

// Thread-safe as far as its callers are: DispatchAll runs on the sweeper and
// on the writer thread (after a claim commits), reading the fixed route table.
class Dispatcher : public SuccessorClaims {
 public:
  Dispatcher(Runtime& runtime, RouteTable& routes) : rt_(runtime), routes_(routes) {}

  // Rows of one route enter its pool together, so that a batch endpoint's
  // worker finds a whole batch rather than the fragment queued before it
  // woke up. Rows without a route, or that the pool refuses, or claimed while
  // the agent stops, are reverted.
  void DispatchAll(std::vector<store::Claimed> claimed);

  // The eager path: claims these committed rows on the writer and dispatches
  // them after the claim commits; with an open breaker they go back to the
  // sweeper. A row whose topic is known (not empty) and has no route, or
  // whose endpoint's breaker is not closed, is not claimed at all: it stays
  // pending, without two writes and an fsync for nothing.
  void ClaimCommitted(std::vector<store::EnqueuedRow> rows);

  // Rows the eager path claimed, once their claim committed (on the writer
  // thread): to their pools, or back to pending while the agent stops or
  // their endpoint's breaker is not closed (the sweeper decides then).
  void DispatchEager(std::vector<store::Claimed> claimed);

  // A run of one ordering key (Store::ClaimRunAfter), once its claim
  // committed: into its route's pool as one piece that one worker sends in
  // order; what does not fit, or the whole run while the agent stops or the
  // endpoint's breaker is not closed, goes back to pending.
  void DispatchRun(std::vector<store::Claimed> run);

  // The next rows of keys whose rows the writer completed (SuccessorClaims):
  // none while the agent stops or takes rows back from a crashed agent
  // (the sweeper's probation, as on the eager path); handed over as the
  // eager path's rows.
  std::vector<store::Claimed> Claim(store::Store& s, const std::string& topic,
                                    std::span<const std::string> ordering_keys) override;
  void HandOver(std::vector<store::Claimed> claimed) override { DispatchEager(std::move(claimed)); }

 private:
  // Rows a pool refused (counted in `sending` before the offer): they go
  // back to pending and the route has a backlog for the sweeper.
  void GiveBack(Route& route, const std::vector<store::Claimed>& rejected);

  Runtime& rt_;
  RouteTable& routes_;
};

}  // namespace outbox::agent
