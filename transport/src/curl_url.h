// libcurl's URL API (curl_url), the one URL parser of the transport: HTTP
// URLs (options.cc, endpoint.cc) and broker URLs (broker_url.cc).
#pragma once

#include <curl/curl.h>

#include <memory>
#include <new>
#include <optional>
#include <string>

namespace outbox::transport::internal {

struct CurlUrlDeleter {
  void operator()(CURLU* url) const { curl_url_cleanup(url); }
};
using CurlUrlPtr = std::unique_ptr<CURLU, CurlUrlDeleter>;

// An empty URL handle. Throws std::bad_alloc.
inline CurlUrlPtr NewCurlUrl() {
  CurlUrlPtr url(curl_url());
  if (!url) throw std::bad_alloc();
  return url;
}

// The URL's `part` as libcurl gives it with `flags`, or nullopt when the URL
// has none (an empty query, "?", is a part, ""). Throws std::bad_alloc.
inline std::optional<std::string> CurlUrlPart(CURLU* url, CURLUPart part, unsigned flags = 0) {
  char* text = nullptr;
  const CURLUcode code = curl_url_get(url, part, &text, flags);
  if (code == CURLUE_OUT_OF_MEMORY) throw std::bad_alloc();
  if (code != CURLUE_OK || text == nullptr) return std::nullopt;
  std::string value(text);
  curl_free(text);
  return value;
}

}  // namespace outbox::transport::internal
