// Fuzz target: a topic's URL as each kind of sink reads it
// (transport::SinkKindOf, transport::ValidateSink). Input: the URL.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fuzz_input.h"
#include "outbox/transport.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace outbox;
  fuzz::FuzzInput input(data, size);
  transport::EndpointOptions options;
  options.url = std::string(input.Rest());
  bool accepted = false;
  try {
    transport::ValidateSink(options);
    accepted = true;
  } catch (const std::invalid_argument& error) {
    // Every refusal names the field it is about.
    const std::string what = error.what();
    FUZZ_CHECK(what.starts_with("url: ") || what.starts_with("tls") ||
               what.starts_with("nats") || what.starts_with("mqtt") ||
               what.starts_with("amqp"));
  }
  if (accepted) {
    const transport::SinkKind kind = transport::SinkKindOf(options.url);
    if (kind != transport::SinkKind::kHttp) {
      // An accepted broker URL has a host and a subject or topic, no
      // credentials and no wildcard of the publish side.
      const std::size_t authority = options.url.find("://") + 3;
      const std::size_t slash = options.url.find('/', authority);
      FUZZ_CHECK(slash != std::string::npos && slash > authority);
      FUZZ_CHECK(slash + 1 < options.url.size());
      FUZZ_CHECK(options.url.substr(authority, slash - authority).find('@') == std::string::npos);
      if (kind == transport::SinkKind::kMqtt) {
        FUZZ_CHECK(options.url.find_first_of("+#", slash) == std::string::npos);
      }
    }
  }
  return 0;
}
