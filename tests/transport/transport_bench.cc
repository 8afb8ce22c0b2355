// transport_bench: requests per second of outbox::transport::Endpoint beside a
// raw libcurl loop doing the same requests in the same process, against a
// local server that does as little as possible.
//
//   transport_bench [repetitions=15] [requests_per_repetition=2000]
//
// Each comparison runs its two sides back to back, in alternating order, in
// every repetition; the table shows median rates and the median of the
// per-repetition ratios (steady even when other work on the machine makes
// absolute rates swing). Not a ctest test.
#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "../common/null_http_server.h"
#include "outbox/transport.h"

namespace {

namespace transport = outbox::transport;
using SteadyClock = std::chrono::steady_clock;

constexpr int kConcurrency = 8;
constexpr char kPayload[] =
    R"({"order_id":"A-1024","customer":"c-77","items":[{"sku":"X1","qty":2},)"
    R"({"sku":"Y9","qty":1}],"total_cents":4599,"currency":"EUR"})";
const std::string kMessageId = transport::MessageId("bench-db", "order.created", "A-1024");

void Check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(what);
}

using NullServer = outbox::testing::NullHttpServer;

std::size_t Discard(char*, std::size_t size, std::size_t count, void*) { return size * count; }

// The baseline handle: the same request as the transport sends (POST, the
// payload, a Content-Type and an Idempotency-Key, no Expect), nothing more.
struct RawHandle {
  explicit RawHandle(const std::string& url) : easy(curl_easy_init()) {
    headers = curl_slist_append(headers, "Content-Type: application/json");
    headers = curl_slist_append(headers, ("Idempotency-Key: " + kMessageId).c_str());
    headers = curl_slist_append(headers, "Expect:");
    curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, kPayload);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, static_cast<long>(sizeof kPayload - 1));
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &Discard);
  }
  ~RawHandle() {
    curl_easy_cleanup(easy);
    curl_slist_free_all(headers);
  }
  RawHandle(const RawHandle&) = delete;
  RawHandle& operator=(const RawHandle&) = delete;

  void CheckDelivered(CURLcode code) const {
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    Check(code == CURLE_OK && status == 200, "raw libcurl request failed");
  }

  CURL* easy;
  curl_slist* headers = nullptr;
};

double RequestsPerSecond(int requests, SteadyClock::time_point start) {
  return requests / std::chrono::duration<double>(SteadyClock::now() - start).count();
}

double RawEasyPerform(const std::string& url, int requests) {
  RawHandle handle(url);
  const auto start = SteadyClock::now();
  for (int i = 0; i < requests; ++i) handle.CheckDelivered(curl_easy_perform(handle.easy));
  return RequestsPerSecond(requests, start);
}

// The transfer shape Endpoint uses (an easy handle driven by a multi handle
// of its own), without anything else of the transport.
double RawOwnMulti(const std::string& url, int requests) {
  RawHandle handle(url);
  CURLM* multi = curl_multi_init();
  const auto start = SteadyClock::now();
  for (int i = 0; i < requests; ++i) {
    curl_multi_add_handle(multi, handle.easy);
    int running = 1;
    while (true) {
      curl_multi_perform(multi, &running);
      if (running == 0) break;
      curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
    }
    int queued = 0;
    const CURLMsg* message = curl_multi_info_read(multi, &queued);
    handle.CheckDelivered(message != nullptr ? message->data.result : CURLE_GOT_NOTHING);
    curl_multi_remove_handle(multi, handle.easy);
  }
  const double rate = RequestsPerSecond(requests, start);
  curl_multi_cleanup(multi);
  return rate;
}

// kConcurrency transfers in flight on one multi handle, one thread.
double RawMultiConcurrent(const std::string& url, int requests) {
  std::vector<std::unique_ptr<RawHandle>> handles;
  CURLM* multi = curl_multi_init();
  const auto start = SteadyClock::now();
  int started = 0;
  for (; started < kConcurrency; ++started) {
    handles.push_back(std::make_unique<RawHandle>(url));
    curl_multi_add_handle(multi, handles.back()->easy);
  }
  std::map<CURL*, RawHandle*> by_easy;
  for (const auto& handle : handles) by_easy[handle->easy] = handle.get();
  int finished = 0;
  while (finished < requests) {
    int running = 0;
    curl_multi_perform(multi, &running);
    int queued = 0;
    while (const CURLMsg* message = curl_multi_info_read(multi, &queued)) {
      RawHandle* handle = by_easy.at(message->easy_handle);
      handle->CheckDelivered(message->data.result);
      ++finished;
      curl_multi_remove_handle(multi, handle->easy);
      if (started < requests) {
        ++started;
        curl_multi_add_handle(multi, handle->easy);
      }
    }
    if (finished < requests) curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
  }
  const double rate = RequestsPerSecond(requests, start);
  for (const auto& handle : handles) curl_multi_remove_handle(multi, handle->easy);
  curl_multi_cleanup(multi);
  return rate;
}

// kConcurrency threads, each with its own easy handle and curl_easy_perform:
// the agent's threading model without the transport.
double RawEasyPerformThreads(const std::string& url, int requests) {
  std::atomic<int> remaining{requests};
  std::atomic<bool> failed{false};
  const auto start = SteadyClock::now();
  {
    std::vector<std::jthread> workers;
    for (int w = 0; w < kConcurrency; ++w) {
      workers.emplace_back([&] {
        try {
          RawHandle handle(url);
          while (remaining.fetch_sub(1) > 0) handle.CheckDelivered(curl_easy_perform(handle.easy));
        } catch (...) {  // nothing may escape a thread
          failed = true;
        }
      });
    }
  }
  const double rate = RequestsPerSecond(requests, start);
  Check(!failed, "raw libcurl request failed");
  return rate;
}

// The alternative design for concurrent pushes: kConcurrency worker threads
// hand their transfer to one I/O thread driving a shared multi handle and
// wait for it to finish.
double RawSharedMultiThreads(const std::string& url, int requests) {
  struct Slot {
    explicit Slot(const std::string& url) : handle(url) {}
    RawHandle handle;
    std::condition_variable finished;
    bool done = false;         // guarded by mutex
    CURLcode code = CURLE_OK;  // guarded by mutex
  };
  std::mutex mutex;
  std::vector<Slot*> submitted;  // guarded by mutex
  bool stop = false;             // guarded by mutex
  CURLM* multi = curl_multi_init();
  std::vector<std::unique_ptr<Slot>> slots;
  for (int w = 0; w < kConcurrency; ++w) {
    slots.push_back(std::make_unique<Slot>(url));
    curl_easy_setopt(slots.back()->handle.easy, CURLOPT_PRIVATE, slots.back().get());
  }
  std::atomic<int> remaining{requests};
  std::atomic<bool> failed{false};
  const auto start = SteadyClock::now();
  std::jthread io([&] {
    while (true) {
      std::vector<Slot*> added;
      {
        std::lock_guard lock(mutex);
        if (stop) return;
        added.swap(submitted);
      }
      for (Slot* slot : added) curl_multi_add_handle(multi, slot->handle.easy);
      int running = 0;
      curl_multi_perform(multi, &running);
      int queued = 0;
      while (const CURLMsg* message = curl_multi_info_read(multi, &queued)) {
        Slot* slot = nullptr;
        curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, &slot);
        const CURLcode code = message->data.result;
        curl_multi_remove_handle(multi, slot->handle.easy);
        {
          std::lock_guard lock(mutex);
          slot->code = code;
          slot->done = true;
        }
        slot->finished.notify_one();
      }
      curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
    }
  });
  {
    std::vector<std::jthread> workers;
    for (int w = 0; w < kConcurrency; ++w) {
      workers.emplace_back([&, slot = slots[static_cast<std::size_t>(w)].get()] {
        try {
          while (remaining.fetch_sub(1) > 0) {
            {
              std::lock_guard lock(mutex);
              slot->done = false;
              submitted.push_back(slot);
            }
            curl_multi_wakeup(multi);
            std::unique_lock lock(mutex);
            slot->finished.wait(lock, [slot] { return slot->done; });
            lock.unlock();
            slot->handle.CheckDelivered(slot->code);
          }
        } catch (...) {  // nothing may escape a thread
          failed = true;
        }
      });
    }
  }
  const double rate = RequestsPerSecond(requests, start);
  {
    std::lock_guard lock(mutex);
    stop = true;
  }
  curl_multi_wakeup(multi);
  io.join();
  slots.clear();
  curl_multi_cleanup(multi);
  Check(!failed, "raw libcurl request failed");
  return rate;
}

transport::Message BenchMessage() {
  return {.message_id = kMessageId, .topic = "order.created", .payload = kPayload};
}

void CheckDelivered(const transport::Result& result) {
  if (result.outcome != transport::Outcome::kDelivered) {
    throw std::runtime_error("transport push failed: " + result.error);
  }
}

double OursSequential(const std::string& url, int requests) {
  transport::EndpointOptions options;
  options.url = url;
  transport::Endpoint endpoint(options);
  const transport::Message message = BenchMessage();
  const auto start = SteadyClock::now();
  for (int i = 0; i < requests; ++i) CheckDelivered(endpoint.Push(message));
  return RequestsPerSecond(requests, start);
}

// kConcurrency worker threads sharing one Endpoint, as the agent's pool does.
double OursConcurrent(const std::string& url, int requests) {
  transport::EndpointOptions options;
  options.url = url;
  transport::Endpoint endpoint(options);
  const transport::Message message = BenchMessage();
  std::atomic<int> remaining{requests};
  std::atomic<bool> failed{false};
  const auto start = SteadyClock::now();
  {
    std::vector<std::jthread> workers;
    for (int w = 0; w < kConcurrency; ++w) {
      workers.emplace_back([&] {
        try {
          while (remaining.fetch_sub(1) > 0) {
            if (endpoint.Push(message).outcome != transport::Outcome::kDelivered) failed = true;
          }
        } catch (...) {  // nothing may escape a thread
          failed = true;
        }
      });
    }
  }
  const double rate = RequestsPerSecond(requests, start);
  Check(!failed, "transport push failed");
  return rate;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int repetitions = argc > 1 ? std::atoi(argv[1]) : 15;
    const int requests = argc > 2 ? std::atoi(argv[2]) : 2000;
    Check(repetitions > 0 && requests > 0, "usage: transport_bench [repetitions] [requests]");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    NullServer server;
    const std::string url = server.Url();

    using Run = std::function<double(const std::string&, int)>;
    struct Comparison {
      const char* title;
      Run ours;
      Run baseline;
      std::vector<double> ours_rates = {}, baseline_rates = {}, ratios = {};
    };
    std::vector<Comparison> comparisons = {
        {"one handle, sequential; raw: curl_easy_perform loop", OursSequential, RawEasyPerform},
        {"8 concurrent; raw: one multi handle, 8 transfers", OursConcurrent, RawMultiConcurrent},
        {"8 concurrent; raw: 8 threads, curl_easy_perform each", OursConcurrent,
         RawEasyPerformThreads},
        {"8 concurrent; rejected design: 8 threads, shared multi, I/O thread", OursConcurrent,
         RawSharedMultiThreads},
        {"transfer shape alone: raw easy in own multi vs curl_easy_perform", RawOwnMulti,
         RawEasyPerform},
    };
    for (Comparison& c : comparisons) c.ours(url, requests / 4), c.baseline(url, requests / 4);
    // Each pair runs back to back, in alternating order, so that the load of
    // a shared machine hits both sides of a ratio alike.
    for (int r = 0; r < repetitions; ++r) {
      for (Comparison& c : comparisons) {
        double ours = 0;
        double baseline = 0;
        if (r % 2 == 0) {
          ours = c.ours(url, requests);
          baseline = c.baseline(url, requests);
        } else {
          baseline = c.baseline(url, requests);
          ours = c.ours(url, requests);
        }
        c.ours_rates.push_back(ours);
        c.baseline_rates.push_back(baseline);
        c.ratios.push_back(ours / baseline);
      }
    }

    std::printf("transport_bench: %d repetitions x %d POSTs of %zu bytes, loopback null server\n",
                repetitions, requests, sizeof kPayload - 1);
    std::printf("%-68s %9s %9s %7s\n", "medians (requests/s; ratio = median of paired ratios)",
                "ours", "raw", "ratio");
    for (const Comparison& c : comparisons) {
      std::printf("%-68s %9.0f %9.0f %7.3f\n", c.title, Median(c.ours_rates),
                  Median(c.baseline_rates), Median(c.ratios));
    }
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "transport_bench: %s\n", error.what());
    return 1;
  }
}
