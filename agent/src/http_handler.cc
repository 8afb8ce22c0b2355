#include "http_handler.h"

namespace outbox::agent {

HandlerResult Handler::HandleBatch(std::span<const Delivery> deliveries) {
  for (const Delivery& delivery : deliveries) {
    HandlerResult result = Handle(delivery);
    if (result.outcome != Outcome::kDelivered) return result;
  }
  return {};
}
namespace {

transport::Message ToMessage(const Delivery& delivery) {
  transport::Message message;
  message.id = delivery.message_id;
  message.topic = delivery.topic;
  message.payload = delivery.payload;
  if (delivery.headers != nullptr) message.headers = *delivery.headers;
  message.created_at_ms = delivery.created_at_ms;
  return message;
}

HandlerResult FromResult(transport::Result result) {
  HandlerResult out;
  out.outcome = result.outcome;
  out.http_status = result.http_status;
  out.endpoint_gone = result.endpoint_gone;
  out.retry_after_ms = result.retry_after_ms;
  out.error = std::move(result.error);
  return out;
}

}  // namespace

HttpHandler::HttpHandler(transport::EndpointOptions options) : endpoint_(std::move(options)) {}

HandlerResult HttpHandler::Handle(const Delivery& delivery) {
  return FromResult(endpoint_.Push(ToMessage(delivery)));
}

// A batch-mode endpoint always gets the batch format, even with one member:
// its receiver parses one shape of body.
HandlerResult HttpHandler::HandleBatch(std::span<const Delivery> deliveries) {
  std::vector<transport::Message> messages;
  messages.reserve(deliveries.size());
  for (const Delivery& delivery : deliveries) messages.push_back(ToMessage(delivery));
  return FromResult(endpoint_.PushBatch(messages));
}

void HttpHandler::Abort() { endpoint_.AbortAll(); }

}  // namespace outbox::agent
