// /metrics (Prometheus text, or OpenMetrics when the Accept header asks for
// it) and /healthz (200 while an agent runs and its sweeper works, else 503
// with one line of reason) over HTTP, for the agent in an AgentSlot.
// Internal to the daemon library. Owns its server thread: the destructor
// stops and joins it.
#pragma once

#include <memory>

#include "agent_slot.h"
#include "util/listen_address.h"

namespace spdlog {
class logger;
}

namespace outbox::daemon {

class MetricsServer {
 public:
  // Binds at once, so that a taken port fails the start rather than a
  // thread. Throws std::runtime_error naming the address. `slot` must
  // outlive the server.
  // /healthz asks `metrics` whether the agent is in trouble.
  MetricsServer(const util::ListenAddress& address, AgentSlot& slot,
                std::shared_ptr<const agent::Metrics> metrics,
                std::shared_ptr<spdlog::logger> logger);
  // Stops serving and joins the thread.
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The bound port (the one the kernel chose when the address asked for 0).
  int port() const;
  // Starts answering requests on the server's own thread.
  void Start();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace outbox::daemon
