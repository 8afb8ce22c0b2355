// The raw libcurl baselines of figures 3 and 4: the same requests the
// transport sends (POST, the body, its headers, no Expect) on kept-alive
// connections, with nothing else around them.
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "outbox/transport.h"

namespace outbox::bench {

// One prepared request: a body and its header list.
class RawRequest {
 public:
  RawRequest(std::string body, const transport::Headers& headers);
  ~RawRequest();
  RawRequest(RawRequest&& other) noexcept;
  RawRequest(const RawRequest&) = delete;
  RawRequest& operator=(const RawRequest&) = delete;
  RawRequest& operator=(RawRequest&&) = delete;

  const std::string& body() const { return body_; }
  curl_slist* headers() const { return headers_; }

 private:
  std::string body_;
  curl_slist* headers_ = nullptr;
};

// A kept-alive easy handle posting to `url`.
class RawHandle {
 public:
  explicit RawHandle(const std::string& url);
  ~RawHandle();
  RawHandle(const RawHandle&) = delete;
  RawHandle& operator=(const RawHandle&) = delete;
  CURL* easy() const { return easy_; }
  void Set(const RawRequest& request);
  // Throws unless the transfer ended with a 2xx answer (nginx's sink says 204).
  void Check(CURLcode code) const;
  void Post(const RawRequest& request);

 private:
  CURL* easy_;
};

// Requests per second posting every request once:
// one handle, curl_easy_perform in a loop;
double RawSequential(const std::string& url, const std::vector<RawRequest>& requests);
// `in_flight` threads, each with its own handle and curl_easy_perform;
double RawThreads(const std::string& url, const std::vector<RawRequest>& requests,
                  int in_flight);
// one thread, one multi handle keeping `in_flight` transfers going;
double RawMulti(const std::string& url, const std::vector<RawRequest>& requests, int in_flight);
// the faster of RawThreads and RawMulti (RawSequential for 1).
double RawBest(const std::string& url, const std::vector<RawRequest>& requests, int in_flight);

}  // namespace outbox::bench
