// Fuzz target: a row's `headers` column, as another application may have
// written it, through transport::ParseRowHeaders and BuildHeaders. Either
// it is refused with std::invalid_argument naming "headers", or the request
// headers it yields hold the invariants of http_checks.h.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fuzz_input.h"
#include "http_checks.h"
#include "outbox/transport.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace outbox;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  transport::Headers row;
  try {
    row = transport::ParseRowHeaders(text);
  } catch (const std::invalid_argument& e) {
    FUZZ_CHECK(std::string_view(e.what()).starts_with("headers"));
    return 0;
  }
  if (text.empty()) FUZZ_CHECK(row.empty());
  static const transport::EndpointOptions options = [] {
    transport::EndpointOptions o;
    o.url = "http://127.0.0.1/events";
    o.ce_source = "urn:fuzz";
    return o;
  }();
  const std::string id(64, 'a');
  transport::Message message;
  message.message_id = id;
  message.topic = "t";
  message.payload = "{}";
  message.headers = row;
  for (const auto mode : {transport::CloudEventsMode::kNone, transport::CloudEventsMode::kBinary}) {
    transport::EndpointOptions with_mode = options;
    with_mode.cloudevents = mode;
    try {
      fuzz::CheckRequestHeaders(transport::BuildHeaders(with_mode, message, "{}", 1700000000), id);
    } catch (const std::invalid_argument& e) {
      FUZZ_CHECK(std::string_view(e.what()).starts_with("headers"));
    }
  }
  return 0;
}
