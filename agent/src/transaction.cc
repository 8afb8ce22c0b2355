// agent::Transaction: the store's producer transaction, whose committed rows
// go to the agent's eager path.
#include "outbox/agent.h"

namespace outbox::agent {

Transaction::Transaction(Agent* agent, store::Producer& producer)
    : agent_(agent), transaction_(producer) {}

Transaction::~Transaction() = default;

store::EnqueueResult Transaction::Enqueue(const store::NewMessage& message, bool idempotent) {
  store::EnqueueOptions options;
  options.idempotent = idempotent;
  return transaction_.Enqueue(message, options);
}

void Transaction::Commit() {
  const std::vector<store::EnqueuedRow> committed = transaction_.Commit();
  // Only now are the messages real: hand them to the eager path.
  if (agent_ != nullptr && !committed.empty()) agent_->NotifyCommitted(committed);
}

void Transaction::Rollback() { transaction_.Rollback(); }

}  // namespace outbox::agent
