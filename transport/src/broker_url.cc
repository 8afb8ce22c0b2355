// Broker URLs (nats://, tls://, mqtt://, mqtts://, amqp://, amqps://), read
// by libcurl's URL parser; here only what a broker URL refuses beyond it.
#include <algorithm>
#include <charconv>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "curl_url.h"
#include "internal.h"
#include "outbox/transport.h"
#include "util/utf8.h"

namespace outbox::transport::internal {
namespace {

// Longer than any broker URL that can work (an MQTT topic is at most 65 535
// bytes, an AMQP virtual host 255, a NATS subject one protocol line), far
// under libcurl's own 8 MB.
constexpr std::size_t kMaxBrokerUrlBytes = 128 * 1024;

// The schemes are not libcurl's; the path is the subject, topic or virtual
// host as written (no "." or ".." segment removed); an MQTT topic may hold
// spaces.
constexpr unsigned kBrokerUrlFlags =
    CURLU_NON_SUPPORT_SCHEME | CURLU_PATH_AS_IS | CURLU_ALLOW_SPACE;

constexpr std::string_view kNoCredentials =
    "must not carry credentials; give them under nats, mqtt or amqp";

[[noreturn]] void Fail(std::string_view why) { throw OptionError("url", std::string(why)); }

// What libcurl's refusal of a URL means, said the way the other checks say it.
[[noreturn]] void FailParse(CURLUcode code) {
  switch (code) {
    case CURLUE_OUT_OF_MEMORY:
      throw std::bad_alloc();
    case CURLUE_BAD_PORT_NUMBER:
      Fail("port must be a number 1..65535");
    case CURLUE_NO_HOST:
      Fail("has no host");
    case CURLUE_BAD_IPV6:
      Fail("host is not an IPv6 address in brackets (e.g. [::1])");
    case CURLUE_BAD_HOSTNAME:
      Fail("host holds a character no host name has");
    case CURLUE_BAD_LOGIN:
    case CURLUE_BAD_USER:
    case CURLUE_BAD_PASSWORD:
      Fail(kNoCredentials);
    default:
      Fail(std::string("is not a valid URL (") + curl_url_strerror(code) + ")");
  }
}

// What is refused before libcurl reads the text: its length, bytes a C
// string or a URL cannot hold, and "scheme:///path", which libcurl reads as
// the host "path".
void CheckText(std::string_view url, std::size_t authority) {
  if (url.size() > kMaxBrokerUrlBytes) {
    Fail("is longer than " + std::to_string(kMaxBrokerUrlBytes) + " bytes");
  }
  if (url.find('\0') != std::string_view::npos) Fail("holds a NUL byte");
  if (HasControlCharacter(url)) Fail("holds a control character");
  if (authority >= url.size() || url.find_first_of("/?#", authority) == authority) {
    Fail("has no host");
  }
}

CurlUrlPtr Parse(std::string_view url) {
  EnsureCurlInitialized();
  CurlUrlPtr parsed = NewCurlUrl();
  const CURLUcode code =
      curl_url_set(parsed.get(), CURLUPART_URL, std::string(url).c_str(), kBrokerUrlFlags);
  if (code != CURLUE_OK) FailParse(code);
  return parsed;
}

// A broker URL names a place: no user info, query or fragment. libcurl does
// not report an empty fragment ("mqtt://h/a/#"), so the text is asked.
void CheckNoExtras(CURLU* parsed, std::string_view url, SinkKind kind) {
  if (CurlUrlPart(parsed, CURLUPART_USER) || CurlUrlPart(parsed, CURLUPART_PASSWORD) ||
      CurlUrlPart(parsed, CURLUPART_OPTIONS)) {
    Fail(kNoCredentials);
  }
  if (CurlUrlPart(parsed, CURLUPART_QUERY)) Fail("must not have a query");
  if (url.find('#') != std::string_view::npos) {
    if (kind == SinkKind::kMqtt) Fail("topic must not hold a wildcard (+ or #)");
    Fail("must not have a fragment (#)");
  }
}

// The host without an IPv6 literal's brackets, its zone (if any) after a
// '%', as getaddrinfo takes it.
std::string HostOf(CURLU* parsed) {
  std::string host = CurlUrlPart(parsed, CURLUPART_HOST).value_or("");
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    if (const auto zone = CurlUrlPart(parsed, CURLUPART_ZONEID)) host += "%" + *zone;
  }
  if (host.empty()) Fail("has no host");
  return host;
}

int PortOf(CURLU* parsed, SinkKind kind, bool tls) {
  const std::optional<std::string> text = CurlUrlPart(parsed, CURLUPART_PORT);
  if (!text) {
    if (kind == SinkKind::kNats) return 4222;
    if (kind == SinkKind::kAmqp) return tls ? 5671 : 5672;
    return tls ? 8883 : 1883;
  }
  int port = 0;
  const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), port);
  if (error != std::errc() || end != text->data() + text->size() || port < 1 || port > 65535) {
    Fail("port must be a number 1..65535");
  }
  return port;
}

}  // namespace

BrokerUrl ParseBrokerUrl(std::string_view url) {
  BrokerUrl parsed;
  parsed.kind = SinkKindOf(url);
  if (parsed.kind == SinkKind::kHttp) Fail("is an HTTP URL, not a broker's");
  const std::string_view scheme = url.substr(0, url.find("://"));
  parsed.tls = scheme == "tls" || scheme == "mqtts" || scheme == "amqps";
  CheckText(url, scheme.size() + 3);
  const CurlUrlPtr curl = Parse(url);
  CheckNoExtras(curl.get(), url, parsed.kind);
  parsed.host = HostOf(curl.get());
  parsed.port = PortOf(curl.get(), parsed.kind, parsed.tls);
  // libcurl's path starts with the '/' after the authority ("/" when none).
  const std::string path = CurlUrlPart(curl.get(), CURLUPART_PATH).value_or("/");
  parsed.path = path.substr(path.starts_with('/') ? 1 : 0);
  return parsed;
}

std::string AmqpVirtualHost(std::string_view path) {
  std::string vhost;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '/') Fail("virtual host holds a '/': write it as %2F");
    if (path[i] != '%') {
      vhost += path[i];
      continue;
    }
    unsigned value = 0;
    const char* first = path.data() + i + 1;
    const char* last = path.data() + std::min(path.size(), i + 3);
    const auto [end, error] = std::from_chars(first, last, value, 16);
    if (error != std::errc() || end != first + 2) {
      Fail("virtual host has a % not followed by two hex digits");
    }
    vhost += static_cast<char>(value);
    i += 2;
  }
  if (vhost.empty()) return "/";
  if (vhost.size() > 255 || HasControlCharacter(vhost) || !util::IsValidUtf8(vhost)) {
    Fail("virtual host must be UTF-8 without control characters, at most 255 bytes");
  }
  return vhost;
}

}  // namespace outbox::transport::internal
