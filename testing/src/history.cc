// History (outbox/testing.h): one message's requests and its row now.
#include <sstream>

#include "outbox/testing.h"

namespace outbox::testing {
namespace {

std::string ShowReply(const Reply& reply) {
  switch (reply.kind) {
    case Reply::Kind::kHang:
      return "hang";
    case Reply::Kind::kLose:
      return "lost";
    case Reply::Kind::kStatus:
      break;
  }
  return std::to_string(reply.status);
}

}  // namespace

std::string MessageHistory::Describe() const {
  std::ostringstream out;
  if (!message) return "no such message (" + std::to_string(requests.size()) + " requests)";
  out << message->topic << "/" << message->key << " (id " << message->id << "): ";
  if (requests.empty()) out << "never sent";
  for (std::size_t i = 0; i < requests.size(); ++i) {
    out << (i == 0 ? "" : ", ") << ShowReply(requests[i].reply);
  }
  out << " -> " << store::StatusName(message->status) << " after " << message->attempts
      << (message->attempts == 1 ? " attempt" : " attempts");
  if (message->dead_reason) out << " (" << *message->dead_reason << ")";
  if (message->last_error && message->status != store::Status::kDelivered) {
    out << "; last error: " << *message->last_error;
  }
  return out.str();
}

MessageHistory History(const std::string& db_path, const TestReceiver& receiver, std::int64_t id) {
  store::Options read;
  read.path = db_path;
  read.read_only = true;
  store::Store s(read);
  MessageHistory history;
  Recorder recorder(db_path);
  history.message = recorder.Get(id);
  if (!history.message) return history;
  history.idempotency_key =
      transport::MessageId(s.database_id(), history.message->topic, history.message->key);
  history.requests = receiver.RequestsFor(history.idempotency_key);
  return history;
}

}  // namespace outbox::testing
