#include "metrics_server.h"

#include <spdlog/logger.h>

#include <optional>
#include <stdexcept>
#include <string>

#include "util/http_server.h"

namespace outbox::daemon {
namespace {

namespace http = util::http;

// A Prometheus server or two and a health probe need few connections; the
// cap keeps a local user from taking the daemon's descriptors (the unit's
// LimitNOFILE= counts on it).
constexpr std::size_t kMaxConnections = 16;

http::Response ServeMetrics(AgentSlot& slot, spdlog::logger& log, const http::Request& request) {
  try {
    const auto format = agent::NegotiateMetricsFormat(request.Header("accept").value_or(""));
    if (auto text = slot.RenderMetrics(format)) {
      return http::Response::Text(200, std::move(*text),
                                  std::string(agent::MetricsContentType(format)));
    }
    return http::Response::Text(503, "agent not running\n", "text/plain");
  } catch (const std::exception& e) {
    // A failed database read must not take the server thread down.
    log.error("metrics: {}", e.what());
    return http::Response::Text(500, "cannot read metrics\n", "text/plain");
  }
}

// 503 with one line of reason when no agent runs or its sweeper keeps
// failing (docs/operations.md); the counters answer without the database.
http::Response ServeHealth(AgentSlot& slot, const agent::Metrics& metrics) {
  std::optional<std::string> trouble;
  if (!slot.Running()) {
    trouble = "not running";
  } else {
    trouble = metrics.Trouble();
  }
  return http::Response::Text(trouble ? 503 : 200, trouble ? *trouble + "\n" : "ok\n",
                              "text/plain");
}

}  // namespace

struct MetricsServer::Impl {
  std::optional<http::Server> server;
};

MetricsServer::MetricsServer(const util::ListenAddress& address, AgentSlot& slot,
                             std::shared_ptr<const agent::Metrics> metrics,
                             std::shared_ptr<spdlog::logger> logger)
    : impl_(std::make_unique<Impl>()) {
  std::vector<http::Route> routes;
  routes.push_back({"GET", "/metrics", false, 0, [&slot, logger](const http::Request& request) {
                      return ServeMetrics(slot, *logger, request);
                    }});
  routes.push_back({"GET", "/healthz", false, 0, [&slot, metrics](const http::Request&) {
                      return ServeHealth(slot, *metrics);
                    }});
  http::ServerOptions options;
  options.max_connections = kMaxConnections;
  http::ListenOn where;
  where.tcp = address;
  try {
    impl_->server.emplace(where, std::move(routes), options,
                          [logger](std::string_view line) { logger->error("{}", line); });
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("metrics.listen: ") + e.what());
  }
}

MetricsServer::~MetricsServer() = default;

int MetricsServer::port() const { return impl_->server->port(); }

void MetricsServer::Start() { impl_->server->Start(); }

}  // namespace outbox::daemon
