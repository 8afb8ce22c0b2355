// Commits numbered orders through an Agent, as an application would, for the
// tests that deliver through a sink and then count what arrived.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "outbox/agent.h"
#include "outbox/store.h"
#include "outbox/transport.h"

namespace outbox::transport::testing {

// Messages "order-<first>" to "order-<first + count - 1>" of topic "orders",
// `per_transaction` to an application transaction; returns their message
// ids in order.
inline std::vector<std::string> CommitOrders(agent::Agent& agent, store::Producer& producer,
                                             int first, int count, int per_transaction) {
  std::vector<std::string> ids;
  for (int i = first; i < first + count; i += per_transaction) {
    agent::Transaction txn(&agent, producer);
    for (int j = i; j < std::min(i + per_transaction, first + count); ++j) {
      const std::string key = "order-" + std::to_string(j);
      txn.Enqueue({"orders", key, R"({"order":)" + std::to_string(j) + "}", "", {}});
      ids.push_back(MessageId(agent.database_id(), "orders", key));
    }
    txn.Commit();
  }
  return ids;
}

}  // namespace outbox::transport::testing
