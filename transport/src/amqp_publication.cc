// Outbox messages as AMQP 0-9-1 publishes.
#include "amqp_publication.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "internal.h"
#include "util/clock.h"

namespace outbox::transport::internal {
namespace {

constexpr std::size_t kMaxShortString = 255;

void CheckShortString(std::string_view text, std::string_view what) {
  if (text.size() > kMaxShortString) {
    throw std::invalid_argument(std::string(what) + " is longer than AMQP's 255 bytes");
  }
}

// The name a BuildHeaders header travels under in the headers table, or ""
// when a basic property carries it instead.
std::string TableName(const std::string& name) {
  if (EqualsIgnoreCase(name, "Content-Type") || EqualsIgnoreCase(name, "Idempotency-Key")) {
    return "";  // the content_type and message_id properties
  }
  // CloudEvents AMQP protocol binding: attributes as application
  // properties prefixed "cloudEvents:".
  if (StartsWithIgnoreCase(name, "ce-")) return "cloudEvents:" + name.substr(3);
  if (EqualsIgnoreCase(name, "Schema-Version")) return "schema_version";
  return name;
}

amqp_bytes_t Bytes(const std::string& text) {
  return amqp_bytes_t{text.size(), const_cast<char*>(text.data())};
}

}  // namespace

std::shared_ptr<Publication> MakePublication(const EndpointOptions& options,
                                             const Message& message) {
  auto publication = std::make_shared<Publication>();
  publication->body = BuildBody(options, message);
  const Headers headers = BuildHeaders(options, message, publication->body, util::NowMs() / 1000);
  const AmqpOptions& amqp = options.amqp;
  if (amqp.exchange.empty()) {
    publication->routing_key = amqp.queue;
  } else {
    publication->exchange = amqp.exchange;
    publication->routing_key = ExpandPlaceholders(amqp.routing_key, message);
    CheckShortString(publication->routing_key, "routing key after filling in placeholders");
  }
  publication->message_id = std::string(message.message_id);
  publication->type = std::string(message.topic);
  CheckShortString(publication->type, "topic (the AMQP type property)");
  publication->timestamp_s = message.created_at_ms / 1000;
  for (const auto& [name, value] : headers) {
    if (EqualsIgnoreCase(name, "Content-Type")) {
      CheckShortString(value, "content type");
      publication->content_type = value;
      continue;
    }
    std::string table_name = TableName(name);
    if (table_name.empty()) continue;
    CheckShortString(table_name, "header name \"" + table_name.substr(0, 64) + "\"");
    publication->headers.emplace_back(std::move(table_name), value);
  }
  return publication;
}

PublicationFrame::PublicationFrame(const Publication& publication) {
  properties._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
                      AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_TIMESTAMP_FLAG |
                      AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_APP_ID_FLAG;
  properties.content_type = Bytes(publication.content_type);
  properties.delivery_mode = AMQP_DELIVERY_PERSISTENT;
  properties.message_id = Bytes(publication.message_id);
  properties.timestamp =
      static_cast<std::uint64_t>(std::max<std::int64_t>(0, publication.timestamp_s));
  properties.type = Bytes(publication.type);
  properties.app_id = amqp_cstring_bytes("edge-outbox");
  if (publication.headers.empty()) return;
  entries_.reserve(publication.headers.size());
  for (const auto& [name, value] : publication.headers) {
    amqp_table_entry_t entry{};
    entry.key = Bytes(name);
    entry.value.kind = AMQP_FIELD_KIND_UTF8;
    entry.value.value.bytes = Bytes(value);
    entries_.push_back(entry);
  }
  properties._flags |= AMQP_BASIC_HEADERS_FLAG;
  properties.headers.num_entries = static_cast<int>(entries_.size());
  properties.headers.entries = entries_.data();
}

}  // namespace outbox::transport::internal
