// The admin listener (docs/operations.md, "Console"): the operator's JSON API
// under /admin/api/ and the web console's static files under /admin/, on a
// listener of its own (never the metrics one): HOST:PORT or a Unix socket.
//
// Every /admin/api/ request needs `Authorization: Bearer TOKEN` naming one of
// admin.tokens (compared in constant time): none or an unknown one is 401, a
// read token asking to act 403, both JSON and counted
// (outbox_admin_refused_total). No cookies: a page of another site cannot
// make a browser act. The static files carry no data and need no token; every
// response carries a strict Content-Security-Policy, X-Content-Type-Options,
// Referrer-Policy and X-Frame-Options.
//
// Thread-safety: construct, Start() and the destructor on one thread;
// SetTokens() from any thread (a reload). Requests are served on the
// listener's own thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent_slot.h"
#include "outbox/agent.h"

namespace spdlog {
class logger;
}

namespace outbox::daemon {

class AdminServer {
 public:
  // Binds at once: throws std::runtime_error naming admin.listen when it
  // cannot. `config_json`: the effective configuration, redacted; called on
  // the listener's thread, so it must be thread-safe.
  AdminServer(const agent::AdminConfig& config, std::string db_path, AgentSlot& slot,
              std::shared_ptr<agent::Metrics> metrics, std::function<std::string()> config_json,
              std::shared_ptr<spdlog::logger> logger);
  // Stops the listener and joins its thread.
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  void Start();
  // The bound TCP port; 0 on a Unix socket.
  int port() const;
  // The tokens a reload read; requests after this call use them.
  void SetTokens(std::vector<agent::AdminToken> tokens);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace outbox::daemon
