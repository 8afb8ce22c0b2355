#include "sink_handler.h"

#include <algorithm>
#include <stdexcept>

namespace outbox::agent {

HandlerResult Handler::HandleBatch(std::span<const Delivery> deliveries) {
  for (const Delivery& delivery : deliveries) {
    HandlerResult result = Handle(delivery);
    if (result.outcome != Outcome::kDelivered) return result;
  }
  return {};
}
SinkHandler::SinkHandler(transport::EndpointOptions options,
                         const std::map<std::string, std::string, std::less<>>&
                             url_by_schema_version) {
  std::map<std::string, transport::Sink*, std::less<>> by_url;
  const std::string url = options.url;
  sinks_.push_back(transport::MakeSink(options));
  by_url.emplace(url, sinks_.back().get());
  for (const auto& [version, version_url] : url_by_schema_version) {
    auto it = by_url.find(version_url);
    if (it == by_url.end()) {
      transport::EndpointOptions version_options = options;
      version_options.url = version_url;
      sinks_.push_back(transport::MakeSink(std::move(version_options)));
      it = by_url.emplace(version_url, sinks_.back().get()).first;
    }
    by_version_.emplace(version, it->second);
  }
}

transport::Sink& SinkHandler::SinkFor(const Delivery& delivery) const {
  if (!delivery.schema_version.empty()) {
    if (const auto it = by_version_.find(delivery.schema_version); it != by_version_.end()) {
      return *it->second;
    }
  }
  return *sinks_.front();
}

HandlerResult SinkHandler::Handle(const Delivery& delivery) {
  return SinkFor(delivery).Push(delivery);
}

// A batch-mode endpoint always gets the batch format, even with one member:
// its receiver parses one shape of body. Members bound for different URLs
// (url_by_schema_version) go as one request per URL, in order of first
// appearance; the first failure is the batch's result (the whole batch is
// retried: receivers dedupe by message id), else the last request's answer.
HandlerResult SinkHandler::HandleBatch(std::span<const Delivery> deliveries) {
  std::vector<std::pair<transport::Sink*, std::vector<transport::Message>>> groups;
  for (const Delivery& delivery : deliveries) {
    transport::Sink* sink = &SinkFor(delivery);
    auto group = std::find_if(groups.begin(), groups.end(),
                              [sink](const auto& entry) { return entry.first == sink; });
    if (group == groups.end()) group = groups.insert(groups.end(), {sink, {}});
    group->second.push_back(static_cast<const transport::Message&>(delivery));
  }
  HandlerResult result;
  for (auto& [sink, messages] : groups) {
    try {
      result = sink->PushBatch(messages);
    } catch (const std::invalid_argument& e) {
      if (messages.size() < 2) throw;
      // Over the sink's own bound (batch.max_bytes, batch.max_messages),
      // refused before any I/O: a message failure of the batch, which the
      // worker splits, as it splits one the receiver refused (413); not the
      // endpoint's failure.
      result = {Outcome::kMessageFailure, 0, false, std::nullopt,
                std::string("batch refused unsent: ") + e.what()};
    }
    if (result.outcome != Outcome::kDelivered) break;
  }
  return result;
}

void SinkHandler::Abort() {
  for (const auto& sink : sinks_) sink->AbortAll();
}

}  // namespace outbox::agent
