#include "metrics_server.h"

#include <httplib.h>
#include <spdlog/logger.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

namespace outbox::daemon {
namespace {

// /metrics and /healthz are scraped rarely; two threads are plenty.
constexpr std::size_t kHttpThreads = 2;

}  // namespace

struct MetricsServer::Impl {
  std::shared_ptr<spdlog::logger> logger;
  httplib::Server server;
  int port = 0;
  std::promise<void> done;
  std::jthread thread;  // last: joined before the server goes away
};

MetricsServer::MetricsServer(const util::ListenAddress& address, AgentSlot& slot,
                             std::shared_ptr<const agent::Metrics> metrics,
                             std::shared_ptr<spdlog::logger> logger)
    : impl_(std::make_unique<Impl>()) {
  impl_->logger = std::move(logger);
  httplib::Server& server = impl_->server;
  server.new_task_queue = [] { return new httplib::ThreadPool(kHttpThreads); };
  server.Get("/metrics", [&slot, log = impl_->logger](const httplib::Request& request,
                                                      httplib::Response& response) {
    try {
      const auto format = agent::NegotiateMetricsFormat(request.get_header_value("Accept"));
      if (auto text = slot.RenderMetrics(format)) {
        response.set_content(*text, std::string(agent::MetricsContentType(format)));
      } else {
        response.status = 503;
        response.set_content("agent not running\n", "text/plain");
      }
    } catch (const std::exception& e) {
      // A failed database read must not take the server thread down.
      log->error("metrics: {}", e.what());
      response.status = 500;
      response.set_content("cannot read metrics\n", "text/plain");
    }
  });
  // 503 with one line of reason when no agent runs or its sweeper keeps
  // failing (docs/operations.md); the counters answer without the database.
  server.Get("/healthz", [&slot, metrics](const httplib::Request&,
                                          httplib::Response& response) {
    std::optional<std::string> trouble;
    if (!slot.Running()) {
      trouble = slot.WhyNotRunning();
    } else {
      trouble = metrics->Trouble();
    }
    response.status = trouble ? 503 : 200;
    response.set_content(trouble ? *trouble + "\n" : "ok\n", "text/plain");
  });
  // Port 0 takes any free port; the caller logs the one it got.
  impl_->port = address.port;
  bool bound = false;
  if (address.port == 0) {
    impl_->port = server.bind_to_any_port(address.host);
    bound = impl_->port > 0;
  } else {
    bound = server.bind_to_port(address.host, address.port);
  }
  if (!bound) {
    throw std::runtime_error("metrics.listen: cannot listen on " + address.host + ":" +
                             std::to_string(address.port) + " (" + std::strerror(errno) + ")");
  }
}

MetricsServer::~MetricsServer() {
  if (!impl_->thread.joinable()) return;
  // stop() does nothing until listen_after_bind() has marked the server
  // running, which a signal right after start can beat: repeat until the
  // thread has left it.
  const std::future<void> done = impl_->done.get_future();
  do {
    impl_->server.stop();
  } while (done.wait_for(std::chrono::milliseconds(10)) == std::future_status::timeout);
}

int MetricsServer::port() const { return impl_->port; }

void MetricsServer::Start() {
  impl_->thread = std::jthread([impl = impl_.get()] {
    if (!impl->server.listen_after_bind()) impl->logger->error("metrics server stopped unexpectedly");
    impl->done.set_value();
  });
}

}  // namespace outbox::daemon
