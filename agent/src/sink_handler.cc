#include "sink_handler.h"

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
  message.key = delivery.key;
  message.payload = delivery.payload;
  if (delivery.headers != nullptr) message.headers = *delivery.headers;
  message.created_at_ms = delivery.created_at_ms;
  message.schema_version = delivery.schema_version;
  return message;
}

HandlerResult FromResult(transport::Result result) {
  HandlerResult out;
  out.outcome = result.outcome;
  out.http_status = result.http_status;
  out.endpoint_gone = result.endpoint_gone;
  out.configuration_failure = result.configuration_failure;
  out.retry_after_ms = result.retry_after_ms;
  out.error = std::move(result.error);
  out.response = std::move(result.response_body);
  return out;
}

}  // namespace

SinkHandler::SinkHandler(transport::EndpointOptions options)
    : sink_(transport::MakeSink(std::move(options))) {}

HandlerResult SinkHandler::Handle(const Delivery& delivery) {
  return FromResult(sink_->Push(ToMessage(delivery)));
}

// A batch-mode endpoint always gets the batch format, even with one member:
// its receiver parses one shape of body.
HandlerResult SinkHandler::HandleBatch(std::span<const Delivery> deliveries) {
  std::vector<transport::Message> messages;
  messages.reserve(deliveries.size());
  for (const Delivery& delivery : deliveries) messages.push_back(ToMessage(delivery));
  return FromResult(sink_->PushBatch(messages));
}

void SinkHandler::Abort() { sink_->AbortAll(); }

}  // namespace outbox::agent
