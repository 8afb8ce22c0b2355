#include "raw_curl.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <stdexcept>
#include <thread>

#include "bench_util.h"

namespace outbox::bench {
namespace {

std::size_t Discard(char*, std::size_t size, std::size_t count, void*) { return size * count; }

}  // namespace

RawRequest::RawRequest(std::string body, const transport::Headers& headers)
    : body_(std::move(body)) {
  for (const auto& [name, value] : headers) {
    headers_ = curl_slist_append(headers_, (name + ": " + value).c_str());
  }
  headers_ = curl_slist_append(headers_, "Expect:");
}

RawRequest::~RawRequest() { curl_slist_free_all(headers_); }

RawRequest::RawRequest(RawRequest&& other) noexcept
    : body_(std::move(other.body_)), headers_(other.headers_) {
  other.headers_ = nullptr;
}

RawHandle::RawHandle(const std::string& url) : easy_(curl_easy_init()) {
  if (easy_ == nullptr) throw std::runtime_error("curl_easy_init failed");
  curl_easy_setopt(easy_, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy_, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy_, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(easy_, CURLOPT_POST, 1L);
  curl_easy_setopt(easy_, CURLOPT_WRITEFUNCTION, &Discard);
}

RawHandle::~RawHandle() { curl_easy_cleanup(easy_); }

void RawHandle::Set(const RawRequest& request) {
  curl_easy_setopt(easy_, CURLOPT_HTTPHEADER, request.headers());
  curl_easy_setopt(easy_, CURLOPT_POSTFIELDS, request.body().data());
  curl_easy_setopt(easy_, CURLOPT_POSTFIELDSIZE_LARGE,
                   static_cast<curl_off_t>(request.body().size()));
}

void RawHandle::Check(CURLcode code) const {
  long status = 0;
  curl_easy_getinfo(easy_, CURLINFO_RESPONSE_CODE, &status);
  if (code != CURLE_OK || status < 200 || status > 299) {
    throw std::runtime_error(std::string("raw libcurl request failed: ") +
                             curl_easy_strerror(code) + ", HTTP " + std::to_string(status));
  }
}

void RawHandle::Post(const RawRequest& request) {
  Set(request);
  Check(curl_easy_perform(easy_));
}

double RawSequential(const std::string& url, const std::vector<RawRequest>& requests) {
  RawHandle handle(url);
  const auto start = SteadyClock::now();
  for (const RawRequest& request : requests) handle.Post(request);
  return static_cast<double>(requests.size()) / SecondsSince(start);
}

double RawThreads(const std::string& url, const std::vector<RawRequest>& requests,
                  int in_flight) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  const auto start = SteadyClock::now();
  {
    std::vector<std::jthread> workers;
    for (int w = 0; w < in_flight; ++w) {
      workers.emplace_back([&] {
        try {
          RawHandle handle(url);
          for (std::size_t i; (i = next.fetch_add(1)) < requests.size();) handle.Post(requests[i]);
        } catch (...) {  // nothing may escape a thread
          failed = true;
        }
      });
    }
  }
  const double rate = static_cast<double>(requests.size()) / SecondsSince(start);
  if (failed) throw std::runtime_error("raw libcurl request failed");
  return rate;
}

double RawMulti(const std::string& url, const std::vector<RawRequest>& requests, int in_flight) {
  std::vector<std::unique_ptr<RawHandle>> handles;
  std::map<CURL*, RawHandle*> by_easy;
  CURLM* multi = curl_multi_init();
  std::size_t started = 0;
  std::size_t finished = 0;
  const auto start = SteadyClock::now();
  for (int i = 0; i < in_flight && started < requests.size(); ++i) {
    handles.push_back(std::make_unique<RawHandle>(url));
    RawHandle* handle = handles.back().get();
    by_easy[handle->easy()] = handle;
    handle->Set(requests[started++]);
    curl_multi_add_handle(multi, handle->easy());
  }
  while (finished < requests.size()) {
    int running = 0;
    curl_multi_perform(multi, &running);
    int queued = 0;
    while (const CURLMsg* message = curl_multi_info_read(multi, &queued)) {
      RawHandle* handle = by_easy.at(message->easy_handle);
      const CURLcode code = message->data.result;
      curl_multi_remove_handle(multi, handle->easy());
      handle->Check(code);
      ++finished;
      if (started < requests.size()) {
        handle->Set(requests[started++]);
        curl_multi_add_handle(multi, handle->easy());
      }
    }
    if (finished < requests.size()) curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
  }
  const double rate = static_cast<double>(requests.size()) / SecondsSince(start);
  handles.clear();
  curl_multi_cleanup(multi);
  return rate;
}

double RawBest(const std::string& url, const std::vector<RawRequest>& requests, int in_flight) {
  if (in_flight <= 1) return RawSequential(url, requests);
  return std::max(RawThreads(url, requests, in_flight), RawMulti(url, requests, in_flight));
}

}  // namespace outbox::bench
