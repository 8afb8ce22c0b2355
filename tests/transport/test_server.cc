#include "test_server.h"

#include <set>
#include <stdexcept>

namespace outbox::transport::testing {

std::string RecordedRequest::Header(const std::string& name) const {
  const auto found = headers.find(name);
  return found == headers.end() ? "" : found->second;
}

TestServer::TestServer() : TestServer(std::make_unique<httplib::Server>()) {}

TestServer::TestServer(std::unique_ptr<httplib::Server> server)
    : server_(std::move(server)),
      scheme_(dynamic_cast<httplib::SSLServer*>(server_.get()) != nullptr ? "https" : "http") {
  // httplib closes a kept-alive connection after 5 requests by default; the
  // reuse tests need it to stay open.
  server_->set_keep_alive_max_count(1000);
}

TestServer::~TestServer() {
  release_.set_value();
  if (thread_.joinable()) {
    server_->stop();
    thread_.join();
  }
}

void TestServer::Post(const std::string& pattern, Handler handler) {
  server_->Post(pattern, [this, handler = std::move(handler)](const httplib::Request& request,
                                                              httplib::Response& response) {
    {
      std::lock_guard lock(mutex_);
      requests_.push_back({request.path, request.headers, request.body, request.remote_port});
    }
    arrived_.notify_all();
    handler(request, response);
  });
}

void TestServer::Start() {
  port_ = server_->bind_to_any_port("127.0.0.1");
  if (port_ <= 0) throw std::runtime_error("test server: cannot bind 127.0.0.1");
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // stop() is a no-op until the accept loop runs, so wait for it: otherwise a
  // test that ends at once would leave the thread listening forever.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!server_->is_running()) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("test server: accept loop did not start");
    }
    std::this_thread::yield();
  }
}

std::string TestServer::Url(const std::string& path) const {
  return scheme_ + "://127.0.0.1:" + std::to_string(port_) + path;
}

std::vector<RecordedRequest> TestServer::requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

std::size_t TestServer::ConnectionCount() const {
  std::lock_guard lock(mutex_);
  std::set<int> ports;
  for (const RecordedRequest& request : requests_) ports.insert(request.remote_port);
  return ports.size();
}

bool TestServer::WaitForRequests(std::size_t count, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return arrived_.wait_for(lock, timeout, [&] { return requests_.size() >= count; });
}

void TestServer::WaitForRelease(std::chrono::milliseconds limit) const {
  released_.wait_for(limit);
}

}  // namespace outbox::transport::testing
