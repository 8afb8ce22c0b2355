// One outbox message as an AMQP 0-9-1 publish: where it goes and the basic
// properties it carries (docs/sinks-rabbitmq.md "Properties"). Pure, so that
// tests see the mapping without a broker.
#pragma once

#include <amqp.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "outbox/transport.h"

namespace outbox::transport::internal {

// A message ready to publish, and its answer. The strings are what the frame
// points into, so the publication outlives the publish. The answer fields are
// written under the sink's mutex; `returned` and `return_error` belong to
// the sink's I/O thread.
struct Publication {
  std::string exchange;
  std::string routing_key;
  std::string body;
  std::string message_id;
  std::string content_type;
  std::string type;  // the topic
  std::int64_t timestamp_s = 0;
  // The headers table: the row's headers, schema_version, trace context and,
  // in CloudEvents binary mode, the cloudEvents: attributes.
  std::vector<std::pair<std::string, std::string>> headers;

  bool abandoned = false;  // the caller stopped waiting
  bool done = false;
  Result result;
  std::condition_variable answered;
  bool returned = false;  // a basic.return came for it
  std::string return_error;
};

// Builds the publication of `message` for `options` (an amqp:// sink's,
// validated). Throws std::invalid_argument naming what makes the message
// impossible to publish (a row header BuildHeaders refuses, a routing key,
// topic, content type or header name over AMQP's 255-byte short strings).
std::shared_ptr<Publication> MakePublication(const EndpointOptions& options,
                                             const Message& message);

// The basic properties of a publication, pointing into it: persistent
// (delivery_mode 2), message_id, content_type, timestamp, type, app_id and
// the headers table as long strings.
struct PublicationFrame {
  explicit PublicationFrame(const Publication& publication);
  PublicationFrame(const PublicationFrame&) = delete;
  PublicationFrame& operator=(const PublicationFrame&) = delete;

  amqp_basic_properties_t properties{};

 private:
  std::vector<amqp_table_entry_t> entries_;
};

}  // namespace outbox::transport::internal
