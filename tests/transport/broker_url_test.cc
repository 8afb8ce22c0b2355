// How a broker URL is read (internal::ParseBrokerUrl, over libcurl's URL
// API): host, port and path the sinks connect with, and the refusals.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "internal.h"
#include "outbox/transport.h"

namespace outbox::transport::internal {
namespace {

std::string ErrorOf(const std::string& url) {
  try {
    ParseBrokerUrl(url);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "";
}

TEST(BrokerUrl, EachSchemeHasItsDefaultPortAndTls) {
  const struct {
    const char* url;
    SinkKind kind;
    bool tls;
    int port;
  } cases[] = {
      {"nats://h/s", SinkKind::kNats, false, 4222},  {"tls://h/s", SinkKind::kNats, true, 4222},
      {"mqtt://h/t", SinkKind::kMqtt, false, 1883},  {"mqtts://h/t", SinkKind::kMqtt, true, 8883},
      {"amqp://h/", SinkKind::kAmqp, false, 5672},   {"amqps://h", SinkKind::kAmqp, true, 5671},
  };
  for (const auto& c : cases) {
    const BrokerUrl url = ParseBrokerUrl(c.url);
    EXPECT_EQ(url.kind, c.kind) << c.url;
    EXPECT_EQ(url.tls, c.tls) << c.url;
    EXPECT_EQ(url.port, c.port) << c.url;
    EXPECT_EQ(url.host, "h") << c.url;
  }
  EXPECT_EQ(ParseBrokerUrl("nats://127.0.0.1:14222/orders.created").port, 14222);
  EXPECT_EQ(ParseBrokerUrl("mqtt://broker.example:65535/t").port, 65535);
  // An empty port is the scheme's default (RFC 3986, 3.2.3), as libcurl reads it.
  EXPECT_EQ(ParseBrokerUrl("nats://h:/s").port, 4222);
  EXPECT_EQ(ParseBrokerUrl("amqps://[::1]:/").port, 5671);
}

TEST(BrokerUrl, AnIpv6LiteralIsTheHostWithoutBrackets) {
  const BrokerUrl url = ParseBrokerUrl("tls://[::1]:4443/orders");
  EXPECT_EQ(url.host, "::1");
  EXPECT_EQ(url.port, 4443);
  EXPECT_EQ(url.path, "orders");
  EXPECT_EQ(ParseBrokerUrl("amqps://[2001:db8::7]/%2Fprod").host, "2001:db8::7");
  // A zone, percent-encoded in the URL (RFC 6874), as getaddrinfo takes it.
  EXPECT_EQ(ParseBrokerUrl("mqtt://[fe80::1%25eth0]:1883/t").host, "fe80::1%eth0");
}

TEST(BrokerUrl, ThePathIsKeptAsWritten) {
  EXPECT_EQ(ParseBrokerUrl("mqtt://h/fleet/../{topic}/{key}").path, "fleet/../{topic}/{key}");
  EXPECT_EQ(ParseBrokerUrl("mqtt://h/a b").path, "a b");
  EXPECT_EQ(ParseBrokerUrl("amqp://h/%2Fprod").path, "%2Fprod");
  EXPECT_EQ(ParseBrokerUrl("amqp://h").path, "");
  EXPECT_EQ(ParseBrokerUrl("amqp://h/").path, "");
  EXPECT_EQ(ParseBrokerUrl("nats://h/a%20b").path, "a%20b");
}

TEST(BrokerUrl, NamesWhatIsWrong) {
  const std::string credentials =
      "url: must not carry credentials; give them under nats, mqtt or amqp";
  const std::pair<std::string, std::string> cases[] = {
      {"https://h/p", "url: is an HTTP URL, not a broker's"},
      {"nats:/h/a", "url: scheme must be one of http, https, nats, tls, mqtt, mqtts, amqp, amqps"},
      {"nats://", "url: has no host"},
      {"nats:///a", "url: has no host"},
      {"nats://:4222/a", "url: has no host"},
      {"nats://u:p@h/a", credentials},
      {"nats://u@h/a", credentials},
      {"amqp://@h/", credentials},
      {"nats://h/a?x=1", "url: must not have a query"},
      {"nats://h/a?", "url: must not have a query"},
      {"nats://h/a#b", "url: must not have a fragment (#)"},
      {"mqtt://h/a/#", "url: topic must not hold a wildcard (+ or #)"},
      {"nats://h:0/a", "url: port must be a number 1..65535"},
      {"nats://h:65536/a", "url: port must be a number 1..65535"},
      {"nats://h:42x/a", "url: port must be a number 1..65535"},
      {"nats://[::1/a", "url: host is not an IPv6 address in brackets (e.g. [::1])"},
      {"nats://h h/a", "url: host holds a character no host name has"},
      {"nats://h\\x/a", "url: host holds a character no host name has"},
      {"nats://h/a\tb", "url: holds a control character"},
      {std::string("nats://h/a\0b", 12), "url: holds a NUL byte"},
      {"mqtt://h/" + std::string(128 * 1024, 't'), "url: is longer than 131072 bytes"},
  };
  for (const auto& [url, error] : cases) {
    EXPECT_EQ(ErrorOf(url), error) << url.substr(0, 40);
  }
}

}  // namespace
}  // namespace outbox::transport::internal
