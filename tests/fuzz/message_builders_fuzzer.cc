// Fuzz target: everything the transport builds from a row before sending it
// (transport::MessageId, BuildBody, BuildHeaders, BuildCloudEvent, the batch
// builders, BatchId, WebhookSignature). Every body must be valid UTF-8 JSON
// where JSON is promised, every header set must hold http_checks.h, and
// anything else must be refused with std::invalid_argument.
#include <rapidjson/document.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "http_checks.h"
#include "outbox/transport.h"

namespace {

bool IsJson(std::string_view text) {
  rapidjson::Document document;
  document.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag>(
      text.data(), text.size());
  return !document.HasParseError();
}

bool IsHexId(const std::string& id) {
  if (id.size() != 64) return false;
  for (const char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace outbox;
  fuzz::FuzzInput input(data, size);
  const std::string database_id(input.Field());
  const std::string topic(input.Field());
  const std::string key(input.Field());
  const std::string payload(input.Field());
  const std::string headers_json(input.Field());
  const std::string content_type(input.Field());
  const std::string ce_source(input.Field());
  const std::string secret(input.Field());
  const std::int64_t created_at = input.Integer();
  const std::int64_t now_s = input.Integer();
  const std::uint8_t modes = input.Byte();

  // Message ids: hex SHA-256, stable, and the length prefixes keep
  // ("ab", "c") apart from ("a", "bc").
  const std::string id = transport::MessageId(database_id, topic, key);
  FUZZ_CHECK(IsHexId(id));
  FUZZ_CHECK(id == transport::MessageId(database_id, topic, key));
  if (!topic.empty()) {
    const std::string shifted_key = topic.back() + key;
    FUZZ_CHECK(id != transport::MessageId(database_id, topic.substr(0, topic.size() - 1),
                                          shifted_key));
  }

  transport::EndpointOptions options;
  options.url = "http://127.0.0.1/events";
  options.content_type = content_type;
  options.ce_source = ce_source;
  if (!secret.empty()) options.signing_secrets = {secret};
  options.cloudevents = static_cast<transport::CloudEventsMode>(modes % 3);
  options.batch.format = (modes & 4) != 0 ? transport::BatchFormat::kCloudEvents
                                          : transport::BatchFormat::kNdjson;
  try {
    transport::Validate(options);
  } catch (const std::invalid_argument&) {
    // Only validated options reach the builders: fall back to good ones.
    options.content_type = "application/json";
    options.ce_source = "urn:fuzz";
    options.signing_secrets.clear();
    transport::Validate(options);
  }

  transport::Headers row;
  try {
    row = transport::ParseRowHeaders(headers_json);
  } catch (const std::invalid_argument&) {
  }
  transport::Message message;
  message.message_id = id;
  message.topic = topic;
  message.payload = payload;
  message.headers = row;
  message.created_at_ms = created_at;

  try {
    const std::string body = transport::BuildBody(options, message);
    if (options.cloudevents == transport::CloudEventsMode::kStructured) {
      FUZZ_CHECK(IsJson(body));
    } else {
      FUZZ_CHECK(body == payload);
    }
    try {
      const transport::Headers headers = transport::BuildHeaders(options, message, body, now_s);
      fuzz::CheckRequestHeaders(headers, id);
      if (options.cloudevents == transport::CloudEventsMode::kBinary) {
        bool type_seen = false;
        for (const auto& [name, value] : headers) {
          if (name == "ce-type") type_seen = value == topic;
        }
        FUZZ_CHECK(type_seen);
      }
    } catch (const std::invalid_argument&) {
    }
  } catch (const std::invalid_argument&) {
  }

  try {
    FUZZ_CHECK(IsJson(transport::BuildCloudEvent(options, message)));
  } catch (const std::invalid_argument&) {
  }

  const std::vector<transport::Message> batch = {message, message};
  const std::string batch_id = transport::BatchId(batch);
  FUZZ_CHECK(IsHexId(batch_id));
  try {
    const std::string ndjson = transport::BuildNdjsonBatch(batch);
    std::size_t lines = 0;
    for (std::size_t start = 0; start < ndjson.size(); ++lines) {
      const std::size_t end = ndjson.find('\n', start);
      FUZZ_CHECK(end != std::string::npos);
      FUZZ_CHECK(IsJson(std::string_view(ndjson).substr(start, end - start)));
      start = end + 1;
    }
    FUZZ_CHECK(lines == batch.size());
  } catch (const std::invalid_argument&) {
  }
  try {
    const std::string events = transport::BuildCloudEventsBatch(options, batch);
    FUZZ_CHECK(IsJson(events));
    fuzz::CheckRequestHeaders(transport::BuildBatchHeaders(options, batch_id, events, now_s),
                              batch_id);
  } catch (const std::invalid_argument&) {
  }
  if (!options.signing_secrets.empty()) {
    const std::string signature =
        transport::WebhookSignature(options.signing_secrets, id, now_s, payload);
    FUZZ_CHECK(signature.rfind("v1,", 0) == 0);
  }
  return 0;
}
