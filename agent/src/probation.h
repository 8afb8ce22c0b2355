// Probation: rows taken back from a crashed agent are resent one at a time,
// alone in flight, so that a crash during such a send can be blamed on that
// row (the crash budget). Run by the sweeper. Not installed.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dispatcher.h"
#include "route_table.h"
#include "runtime.h"

namespace outbox::agent {

// Decided per topic: a quarantined row holds delivery up only while its
// topic can be sent now (routed, breaker closed). One of a topic without a
// route, or whose endpoint is down, waits and blocks nothing; it is counted
// in Runtime::quarantined_unrouted (a metric) and logged once.
// Used by the sweeper's thread only.
class Probation {
 public:
  Probation(Runtime& runtime, RouteTable& routes, Dispatcher& dispatcher)
      : rt_(runtime), routes_(routes), dispatcher_(dispatcher) {}

  // `quarantined`: pending quarantined rows per topic
  // (store::Store::QuarantinedTopics). Sets Runtime::probation and returns
  // it: true while delivery is held for a quarantined row; then, if nothing
  // else is in flight, one quarantined row is claimed and dispatched.
  // Throws store errors.
  bool Step(const std::vector<std::pair<std::string, std::int64_t>>& quarantined,
            std::int64_t now);

  // Claims one quarantined row of `topic` if nothing is in flight, judged
  // inside the writer's transaction: rows claimed by earlier writer tasks
  // (eager claims, next rows of ordering keys) are handed over, and counted
  // in Runtime::sending, before it runs, and later claims see probation on.
  std::vector<store::Claimed> ClaimAlone(const std::string& topic, std::int64_t now);

 private:
  Runtime& rt_;
  RouteTable& routes_;
  Dispatcher& dispatcher_;
  std::set<std::string> unrouted_logged_;
};

}  // namespace outbox::agent
