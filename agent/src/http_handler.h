// The default handler: the topic's HTTP endpoint.
#pragma once

#include "outbox/agent.h"

namespace outbox::agent {

// Sends through a transport::Endpoint (kept-alive connections, one per
// concurrent worker). Thread-safe.
class HttpHandler final : public Handler {
 public:
  // Throws std::invalid_argument naming the bad endpoint field.
  explicit HttpHandler(transport::EndpointOptions options);
  HandlerResult Handle(const Delivery& delivery) override;
  HandlerResult HandleBatch(std::span<const Delivery> deliveries) override;
  void Abort() override;

 private:
  transport::Endpoint endpoint_;
};

}  // namespace outbox::agent
