// consumer_testing: an application's test outside the edge-outbox tree,
// built against an installed edge-outbox through find_package(outbox) and
// outbox::testing alone (no cpp-httplib, no test framework of ours). An agent
// on an in-memory database delivers one message to a TestReceiver; prints
// "delivered=1". Exit status 0 on success, 1 on any error.
#include <cstdio>
#include <exception>
#include <memory>

#include "outbox/testing.h"

int main() {
  try {
    outbox::testing::InMemoryDatabase db;
    outbox::testing::TestReceiver receiver;
    receiver.Then(503);
    auto clock = std::make_shared<outbox::testing::TestClock>();
    outbox::agent::Options options;
    options.db_path = db.path();
    options.clock = clock;
    options.topics["order.created"].endpoint.url = receiver.Url();
    outbox::agent::Agent agent(options);
    agent.Start();
    outbox::agent::Transaction txn(&agent, db.producer());
    const auto id = txn.Enqueue({"order.created", "order-1", "{}", "", {}}).id;
    txn.Commit();
    if (!agent.RunDue()) return 1;
    clock->Advance(std::chrono::hours(1));  // the retry after the 503
    if (!agent.RunDue()) return 1;
    agent.Stop();
    const auto history = outbox::testing::History(db.path(), receiver, id);
    const bool delivered = history.message->status == outbox::store::Status::kDelivered;
    std::printf("delivered=%d\n", delivered ? 1 : 0);
    return delivered && history.requests.size() == 2 ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "consumer_testing: %s\n", error.what());
    return 1;
  }
}
