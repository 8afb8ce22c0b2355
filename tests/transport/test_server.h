// A real HTTP(S) server on 127.0.0.1, on a port the kernel picks, for the
// transport tests. It records every request it is sent.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace outbox::transport::testing {

struct RecordedRequest {
  std::string path;
  httplib::Headers headers;  // names compare case-insensitively
  std::string body;
  int remote_port = 0;  // one per client connection

  // The value of header `name`; "" if absent.
  std::string Header(const std::string& name) const;
  bool Has(const std::string& name) const { return headers.count(name) != 0; }
};

class TestServer {
 public:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  // Plain HTTP.
  TestServer();
  // A server made by the caller (e.g. an httplib::SSLServer).
  explicit TestServer(std::unique_ptr<httplib::Server> server);
  // Releases handlers waiting in WaitForRelease, stops the server and joins
  // its thread.
  ~TestServer();
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  // Registers a POST handler for `pattern` (an httplib regex) that records the
  // request before calling `handler`. Call before Start().
  void Post(const std::string& pattern, Handler handler);

  // Binds 127.0.0.1:0, serves on a thread and returns once accepting.
  void Start();

  int port() const { return port_; }
  // "<scheme>://127.0.0.1:<port><path>".
  std::string Url(const std::string& path) const;

  std::vector<RecordedRequest> requests() const;
  // Distinct client connections seen so far.
  std::size_t ConnectionCount() const;
  // Waits until `count` requests arrived; false if `timeout` passed first.
  bool WaitForRequests(std::size_t count, std::chrono::milliseconds timeout) const;

  // For handlers that simulate a slow or hanging receiver: blocks until the
  // server is torn down or `limit` passes.
  void WaitForRelease(std::chrono::milliseconds limit) const;

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  std::string scheme_;

  mutable std::mutex mutex_;
  mutable std::condition_variable arrived_;
  std::vector<RecordedRequest> requests_;  // guarded by mutex_

  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
};

}  // namespace outbox::transport::testing
