// The default handler: the topic's sink, picked by its URL's scheme (an HTTP
// endpoint, a NATS JetStream subject or an MQTT topic).
#pragma once

#include <memory>

#include "outbox/agent.h"

namespace outbox::agent {

// Sends through a transport::Sink (HTTP: kept-alive connections, one per
// concurrent worker; brokers: one connection per route). Thread-safe.
class SinkHandler final : public Handler {
 public:
  // Throws std::invalid_argument naming the bad endpoint field.
  explicit SinkHandler(transport::EndpointOptions options);
  HandlerResult Handle(const Delivery& delivery) override;
  HandlerResult HandleBatch(std::span<const Delivery> deliveries) override;
  void Abort() override;

 private:
  std::unique_ptr<transport::Sink> sink_;
};

}  // namespace outbox::agent
