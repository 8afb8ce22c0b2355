// TestReceiver (outbox/testing.h): cpp-httplib behind the public header, so
// that a consumer needs nothing but find_package(outbox).
#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "outbox/testing.h"

namespace outbox::testing {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

void CheckReply(const Reply& reply) {
  if (reply.kind != Reply::Kind::kHang && (reply.status < 100 || reply.status > 599)) {
    throw std::invalid_argument("status: expected an HTTP status 100..599, got " +
                                std::to_string(reply.status));
  }
}

}  // namespace

std::string ReceivedRequest::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (EqualsIgnoreCase(key, name)) return value;
  }
  return "";
}

struct TestReceiver::Impl {
  TestReceiverOptions options;
  httplib::Server server;
  std::thread thread;
  int port = 0;

  mutable std::mutex mutex;
  std::condition_variable released_cv;
  bool released = false;                   // guarded by mutex
  std::deque<Reply> script;                // guarded by mutex
  Reply otherwise;                         // guarded by mutex
  std::vector<std::pair<std::function<bool(const ReceivedRequest&)>, Reply>>
      rules;                               // guarded by mutex
  std::vector<ReceivedRequest> requests;   // guarded by mutex

  Reply NextReply(const ReceivedRequest& request) {
    std::lock_guard lock(mutex);
    for (const auto& [which, reply] : rules) {
      if (which(request)) return reply;
    }
    if (script.empty()) return otherwise;
    Reply reply = std::move(script.front());
    script.pop_front();
    return reply;
  }

  std::optional<transport::SignatureCheck> CheckSignature(const ReceivedRequest& r) const {
    if (options.signing_secrets.empty()) return std::nullopt;
    const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
    return transport::VerifyWebhookSignature(options.signing_secrets, r.Header("webhook-id"),
                                             r.Header("webhook-timestamp"), r.body,
                                             r.Header("webhook-signature"), now_ms / 1000);
  }

  void Handle(const httplib::Request& request, httplib::Response& response) {
    ReceivedRequest r;
    r.path = request.path;
    r.headers.assign(request.headers.begin(), request.headers.end());
    r.body = request.body;
    r.idempotency_key = r.Header("Idempotency-Key");
    r.signature = CheckSignature(r);
    r.reply = NextReply(r);
    const Reply reply = r.reply;
    {
      std::lock_guard lock(mutex);
      requests.push_back(std::move(r));
    }
    switch (reply.kind) {
      case Reply::Kind::kHang: {
        std::unique_lock lock(mutex);
        released_cv.wait_for(lock, options.max_hang, [this] { return released; });
        response.status = 503;  // whoever still listens after the hang
        return;
      }
      case Reply::Kind::kLose:
        // The status line and headers go out, then the connection closes
        // before the promised body byte: no complete answer arrives.
        response.status = reply.status;
        response.set_content_provider(
            1, "text/plain", [](std::size_t, std::size_t, httplib::DataSink&) { return false; });
        return;
      case Reply::Kind::kStatus:
        response.status = reply.status;
        if (reply.retry_after) {
          response.set_header("Retry-After", std::to_string(reply.retry_after->count()));
        }
        response.set_content(reply.body, "text/plain");
        return;
    }
  }
};

TestReceiver::TestReceiver() : TestReceiver(TestReceiverOptions{}) {}

TestReceiver::TestReceiver(TestReceiverOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.threads < 1) throw std::invalid_argument("threads: expected a positive integer");
  if (options.max_hang.count() < 0) throw std::invalid_argument("max_hang: must not be negative");
  for (std::size_t i = 0; i < options.signing_secrets.size(); ++i) {
    // Checks each secret's form now, not at the first request.
    (void)transport::WebhookSignature(std::span(&options.signing_secrets[i], 1), "x", 0, "");
  }
  impl_->options = std::move(options);
  Impl* impl = impl_.get();
  const int threads = impl->options.threads;
  impl->server.new_task_queue = [threads] {
    return new httplib::ThreadPool(static_cast<std::size_t>(threads));
  };
  impl->server.set_keep_alive_max_count(1000);
  impl->server.Post(".*", [impl](const httplib::Request& request, httplib::Response& response) {
    impl->Handle(request, response);
  });
  impl->port = impl->server.bind_to_any_port("127.0.0.1");
  if (impl->port <= 0) throw std::runtime_error("TestReceiver: cannot bind 127.0.0.1");
  impl->thread = std::thread([impl] { impl->server.listen_after_bind(); });
  // stop() does nothing until the accept loop runs, so wait for it: a
  // receiver destroyed at once would otherwise leave the thread listening.
  while (!impl->server.is_running()) std::this_thread::yield();
}

TestReceiver::~TestReceiver() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->released = true;
  }
  impl_->released_cv.notify_all();
  impl_->server.stop();
  impl_->thread.join();
}

int TestReceiver::port() const { return impl_->port; }

std::string TestReceiver::Url(std::string_view path) const {
  return "http://127.0.0.1:" + std::to_string(impl_->port) + std::string(path);
}

TestReceiver& TestReceiver::Then(Reply reply) {
  CheckReply(reply);
  std::lock_guard lock(impl_->mutex);
  impl_->script.push_back(std::move(reply));
  return *this;
}

TestReceiver& TestReceiver::Then(int status) { return Then(Reply{.status = status}); }

TestReceiver& TestReceiver::Then(int status, std::chrono::seconds retry_after) {
  if (retry_after.count() < 0) throw std::invalid_argument("retry_after: must not be negative");
  return Then(Reply{.status = status, .retry_after = retry_after});
}

TestReceiver& TestReceiver::ThenHang() { return Then(Reply{.kind = Reply::Kind::kHang}); }
TestReceiver& TestReceiver::ThenLoseAnswer() { return Then(Reply{.kind = Reply::Kind::kLose}); }

TestReceiver& TestReceiver::Otherwise(Reply reply) {
  CheckReply(reply);
  std::lock_guard lock(impl_->mutex);
  impl_->otherwise = std::move(reply);
  return *this;
}

TestReceiver& TestReceiver::Always(std::function<bool(const ReceivedRequest&)> which,
                                   Reply reply) {
  if (!which) throw std::invalid_argument("which: must not be empty");
  CheckReply(reply);
  std::lock_guard lock(impl_->mutex);
  impl_->rules.emplace_back(std::move(which), std::move(reply));
  return *this;
}

std::vector<ReceivedRequest> TestReceiver::Requests() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->requests;
}

std::vector<ReceivedRequest> TestReceiver::RequestsFor(std::string_view idempotency_key) const {
  std::vector<ReceivedRequest> found;
  std::lock_guard lock(impl_->mutex);
  for (const ReceivedRequest& r : impl_->requests) {
    if (r.idempotency_key == idempotency_key) found.push_back(r);
  }
  return found;
}

std::size_t TestReceiver::RequestCount() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->requests.size();
}

}  // namespace outbox::testing
