// EndpointOptions: defaults that need the system, and validation.
#include <curl/curl.h>
#include <unistd.h>

#include <array>
#include <memory>
#include <stdexcept>
#include <string>

#include "curl_url.h"
#include "internal.h"
#include "outbox/transport.h"
#include "util/http_token.h"

namespace outbox::transport {
namespace {

constexpr std::size_t kMaxErrorBodyBytes = 64 * 1024;

[[noreturn]] void Fail(std::string_view field, std::string_view why) {
  throw OptionError(std::string(field), std::string(why));
}

// The URL part, or "" when the URL has none.
std::string UrlPart(CURLU* url, CURLUPart part) {
  return internal::CurlUrlPart(url, part).value_or("");
}

void ValidateUrl(const std::string& url) {
  if (url.empty()) Fail("url", "is required");
  if (url.find('\0') != std::string::npos) Fail("url", "holds a NUL byte");
  internal::EnsureCurlInitialized();
  const internal::CurlUrlPtr parsed = internal::NewCurlUrl();
  const CURLUcode code = curl_url_set(parsed.get(), CURLUPART_URL, url.c_str(), 0);
  if (code != CURLUE_OK) {
    Fail("url", std::string("not a valid absolute URL (") + curl_url_strerror(code) + ")");
  }
  const std::string scheme = UrlPart(parsed.get(), CURLUPART_SCHEME);
  if (scheme != "http" && scheme != "https") Fail("url", "scheme must be http or https");
  if (UrlPart(parsed.get(), CURLUPART_HOST).empty()) Fail("url", "has no host");
  // The URL shows up in logs and errors; credentials must not.
  if (!UrlPart(parsed.get(), CURLUPART_USER).empty() ||
      !UrlPart(parsed.get(), CURLUPART_PASSWORD).empty()) {
    Fail("url",
         "must not carry credentials; send them as a header (e.g. "
         "Authorization from \"env:NAME\")");
  }
}

void ValidateHeaders(const Headers& headers) {
  for (std::size_t i = 0; i < headers.size(); ++i) {
    const auto& [name, value] = headers[i];
    const std::string field = "headers[" + std::to_string(i) + "]";
    if (!util::IsHttpToken(name)) Fail(field, "name is not an HTTP header name");
    if (internal::EqualsIgnoreCase(name, "Content-Type")) {
      Fail(field, "set Content-Type with content_type");
    }
    if (internal::IsReservedForEndpoint(name)) {
      Fail(field, name + " is set by the transport itself");
    }
    if (!internal::IsValidHeaderValue(value)) {
      Fail(field, "value of " + name + " holds a control character");
    }
    if (value.starts_with("env:") || value.starts_with("file:")) {
      Fail(field, "value of " + name +
                      " is an unresolved secret reference "
                      "(resolve it with ResolveSecret)");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (internal::EqualsIgnoreCase(headers[j].first, name)) {
        Fail(field, name + " is given twice");
      }
    }
  }
}

void ValidateReadable(const std::string& path, std::string_view field) {
  if (!path.empty() && access(path.c_str(), R_OK) != 0) {
    Fail(field, "cannot read " + path);
  }
}

}  // namespace

OptionError::OptionError(std::string field, std::string reason)
    : std::invalid_argument(field + ": " + reason),
      field_(std::move(field)),
      reason_(std::move(reason)) {}

std::string DefaultCloudEventsSource() {
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0 || host[0] == '\0') {
    return "urn:edge-outbox:unknown-host";
  }
  return std::string("urn:edge-outbox:") + host.data();
}

void Validate(const EndpointOptions& options) {
  ValidateUrl(options.url);
  internal::ValidateCommon(options);
}

namespace internal {

void ValidateCommon(const EndpointOptions& options) {
  if (options.connect_timeout_ms <= 0) Fail("connect_timeout_ms", "must be positive");
  if (options.timeout_ms <= 0) Fail("timeout_ms", "must be positive");
  ValidateHeaders(options.headers);
  if (options.content_type.empty() || options.content_type.find('/') == std::string::npos ||
      !internal::IsValidHeaderValue(options.content_type)) {
    Fail("content_type", "must be a media type such as application/json");
  }
  if (options.ce_source.empty() || options.ce_source.find_first_of(" \t") != std::string::npos ||
      !internal::IsValidHeaderValue(options.ce_source)) {
    Fail("ce_source", "must be a non-empty URI reference");
  }
  for (std::size_t i = 0; i < options.signing_secrets.size(); ++i) {
    internal::DecodeWebhookSecret(options.signing_secrets[i],
                                  "signing_secrets[" + std::to_string(i) + "]");
  }
  if (options.batch.max_messages == 0) Fail("batch.max_messages", "must be at least 1");
  if (options.batch.max_bytes == 0) Fail("batch.max_bytes", "must be at least 1");
  if (options.max_retry_after_ms < 0) Fail("max_retry_after_ms", "must not be negative");
  if (options.max_error_body_bytes > kMaxErrorBodyBytes) {
    Fail("max_error_body_bytes", "must be at most " + std::to_string(kMaxErrorBodyBytes));
  }
  ValidateReadable(options.tls.ca_file, "tls.ca_file");
  ValidateReadable(options.tls.client_cert_file, "tls.client_cert_file");
  ValidateReadable(options.tls.client_key_file, "tls.client_key_file");
  if (!options.tls.client_key_file.empty() && options.tls.client_cert_file.empty()) {
    Fail("tls.client_key_file", "needs tls.client_cert_file");
  }
}

}  // namespace internal

}  // namespace outbox::transport
