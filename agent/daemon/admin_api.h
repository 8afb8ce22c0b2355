// The operator's JSON API under /admin/api/ (docs/operations.md, "Console"):
// what each route reads or does, given an authenticated caller. The
// listener, the tokens and the static console live in admin_server.h.
// Every action goes through store::Operator, the code outboxctl runs.
//
// Not thread-safe: one AdminApi per admin listener, called on its thread
// only (it owns a database connection of its own).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "agent_slot.h"
#include "outbox/agent.h"
#include "outbox/store.h"

namespace outbox::daemon {

struct ApiRequest {
  std::string method;  // GET or POST
  std::string path;    // after /admin/api/, e.g. "messages/7"
  std::string query;   // raw, after '?'
  std::string body;    // POST: a JSON object
  store::Actor actor;  // the token's name, and where the request came from
  bool may_act = false;  // the token's role is operate
};

struct ApiResponse {
  int status = 200;
  std::string json;
};

class AdminApi {
 public:
  // `config_json`: the effective configuration, redacted (--print's text),
  // current after each reload.
  AdminApi(std::string db_path, AgentSlot& slot, std::function<std::string()> config_json);
  ~AdminApi();
  AdminApi(const AdminApi&) = delete;
  AdminApi& operator=(const AdminApi&) = delete;

  // Never throws: bad input is 400 with {"error": ...}, an unknown route
  // 404, a read token asking to act 403, a database failure 500.
  ApiResponse Handle(const ApiRequest& request);
  // Whether `method` `path` is a route that changes rows (needs operate).
  static bool Acts(const std::string& method);

 private:
  ApiResponse Route(const ApiRequest& request);
  store::Store& Db();

  const std::string db_path_;
  AgentSlot& slot_;
  std::function<std::string()> config_json_;
  std::unique_ptr<store::Store> store_;  // opened at the first request
};

// JSON {"error": message} with `status`.
ApiResponse ApiError(int status, const std::string& message);

}  // namespace outbox::daemon
