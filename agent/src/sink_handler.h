// The default handler: the topic's sink, picked by its URL's scheme (an HTTP
// endpoint, a NATS JetStream subject or an MQTT topic).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "outbox/agent.h"

namespace outbox::agent {

// Sends through a transport::Sink (HTTP: kept-alive connections, one per
// concurrent worker; brokers: one connection per route). Thread-safe.
class SinkHandler final : public Handler {
 public:
  // Throws std::invalid_argument naming the bad endpoint field. A message
  // whose schema version is a key of `url_by_schema_version` goes to that
  // URL's sink; one sink per distinct URL.
  explicit SinkHandler(transport::EndpointOptions options,
                       const std::map<std::string, std::string, std::less<>>&
                           url_by_schema_version = {});
  HandlerResult Handle(const Delivery& delivery) override;
  HandlerResult HandleBatch(std::span<const Delivery> deliveries) override;
  void Abort() override;

 private:
  transport::Sink& SinkFor(const Delivery& delivery) const;

  std::vector<std::unique_ptr<transport::Sink>> sinks_;  // [0]: the topic's url
  std::map<std::string, transport::Sink*, std::less<>> by_version_;
};

}  // namespace outbox::agent
