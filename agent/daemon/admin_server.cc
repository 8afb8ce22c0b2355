#include "admin_server.h"

#include <spdlog/logger.h>

#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>

#include "admin_api.h"
#include "console_assets.h"
#include "util/http_server.h"
#include "util/listen_address.h"

namespace outbox::daemon {
namespace {

namespace http = util::http;

// An operator or two and their browsers: few connections. Bodies are small
// JSON objects (a bulk action's filter).
constexpr std::size_t kMaxConnections = 16;
constexpr std::size_t kMaxBodyBytes = 16 * 1024;

// The console loads its own script and style sheet and talks to its own
// API; nothing else, nothing inline, never inside a frame.
constexpr char kContentSecurityPolicy[] =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

void AddSecurityHeaders(http::Response& response) {
  response.headers.emplace_back("Content-Security-Policy", kContentSecurityPolicy);
  response.headers.emplace_back("X-Content-Type-Options", "nosniff");
  response.headers.emplace_back("Referrer-Policy", "no-referrer");
  response.headers.emplace_back("X-Frame-Options", "DENY");
  response.headers.emplace_back("Cache-Control", "no-store");
}

// Compares every byte whatever the first difference, so the time taken
// tells nothing about how much of a guess was right.
bool SameSecret(std::string_view a, std::string_view b) {
  unsigned diff = a.size() == b.size() ? 0U : 1U;
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0U;
    const auto y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0U;
    diff |= x ^ y;
  }
  return diff == 0;
}

std::optional<std::string_view> BearerToken(const http::Request& request) {
  const std::optional<std::string_view> header = request.Header("authorization");
  if (!header || header->size() < 7) return std::nullopt;
  std::string scheme(header->substr(0, 7));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "bearer ") return std::nullopt;
  std::string_view token = header->substr(7);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  return token;
}

http::Response Json(const ApiResponse& api) {
  http::Response response = http::Response::Text(api.status, api.json + "\n",
                                                  "application/json; charset=utf-8");
  AddSecurityHeaders(response);
  return response;
}

}  // namespace

struct AdminServer::Impl {
  Impl(std::string db_path, AgentSlot& slot, std::shared_ptr<agent::Metrics> counters,
       std::function<std::string()> config_json, std::shared_ptr<spdlog::logger> log)
      : api(std::move(db_path), slot, std::move(config_json)),
        metrics(std::move(counters)),
        logger(std::move(log)) {}

  // The token's entry (checked against every token), or nullopt.
  std::optional<agent::AdminToken> Authenticate(std::string_view presented) {
    std::lock_guard lock(tokens_mutex);
    std::optional<agent::AdminToken> match;
    for (const agent::AdminToken& token : tokens) {
      if (SameSecret(presented, token.secret) && !match) match = token;
    }
    return match;
  }

  http::Response ServeApi(const http::Request& request);
  http::Response ServeStatic(const http::Request& request);

  AdminApi api;  // used on the listener's thread only
  std::shared_ptr<agent::Metrics> metrics;
  std::shared_ptr<spdlog::logger> logger;
  std::mutex tokens_mutex;
  std::vector<agent::AdminToken> tokens;  // guarded by tokens_mutex
  std::optional<http::Server> server;     // last: stopped before the rest goes
};

http::Response AdminServer::Impl::ServeApi(const http::Request& request) {
  constexpr std::string_view kPrefix = "/admin/api/";
  const std::optional<std::string_view> presented = BearerToken(request);
  const std::optional<agent::AdminToken> token =
      presented ? Authenticate(*presented) : std::nullopt;
  if (!token) {
    metrics->AdminRefused(401);
    http::Response response = Json(ApiError(
        401, presented ? "unknown token" : "missing Authorization: Bearer TOKEN header"));
    response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"outboxd admin\"");
    return response;
  }
  ApiRequest api_request;
  api_request.method = request.method;
  api_request.path = request.path.substr(kPrefix.size());
  api_request.query = request.query;
  api_request.body = request.body;
  api_request.may_act = token->role == agent::AdminToken::Role::kOperate;
  api_request.actor.user = token->name;
  api_request.actor.host = request.peer ? "admin socket uid " + std::to_string(request.peer->uid) +
                                              " pid " + std::to_string(request.peer->pid)
                                        : "admin api";
  if (AdminApi::Acts(request.method) && !api_request.may_act) {
    metrics->AdminRefused(403);
    return Json(ApiError(403, "token " + token->name + " has role read; acting needs operate"));
  }
  const ApiResponse response = api.Handle(api_request);
  if (AdminApi::Acts(request.method)) {
    logger->info("admin: {} {} by {} ({}): {}", request.method, request.path, token->name,
                 api_request.actor.host, response.status);
  }
  return Json(response);
}

http::Response AdminServer::Impl::ServeStatic(const http::Request& request) {
  std::string_view name = std::string_view(request.path).substr(std::string_view("/admin/").size());
  if (name.empty()) name = "index.html";
  for (const ConsoleAsset& asset : ConsoleAssets()) {
    if (asset.name == name) {
      http::Response response =
          http::Response::Text(200, std::string(asset.body), std::string(asset.content_type));
      AddSecurityHeaders(response);
      return response;
    }
  }
  http::Response response = http::Response::Text(404, "not found\n");
  AddSecurityHeaders(response);
  return response;
}

AdminServer::AdminServer(const agent::AdminConfig& config, std::string db_path, AgentSlot& slot,
                         std::shared_ptr<agent::Metrics> metrics,
                         std::function<std::string()> config_json,
                         std::shared_ptr<spdlog::logger> logger)
    : impl_(std::make_unique<Impl>(std::move(db_path), slot, std::move(metrics),
                                   std::move(config_json), logger)) {
  SetTokens(config.tokens);
  Impl* impl = impl_.get();
  std::vector<http::Route> routes;
  const auto api = [impl](const http::Request& request) { return impl->ServeApi(request); };
  routes.push_back({"GET", "/admin/api/", true, 0, api});
  routes.push_back({"POST", "/admin/api/", true, kMaxBodyBytes, api});
  routes.push_back({"GET", "/admin", false, 0, [](const http::Request&) {
                      http::Response response = http::Response::Text(308, "");
                      response.headers.emplace_back("Location", "/admin/");
                      return response;
                    }});
  routes.push_back({"GET", "/admin/", true, 0,
                    [impl](const http::Request& request) { return impl->ServeStatic(request); }});
  http::ServerOptions options;
  options.max_connections = kMaxConnections;
  http::ListenOn where;
  if (!config.listen.empty() && config.listen[0] == '/') {
    where.unix_path = config.listen;
    where.unix_mode = 0660;
  } else {
    where.tcp = util::ParseListenAddress(config.listen);
  }
  try {
    impl_->server.emplace(where, std::move(routes), options,
                          [logger](std::string_view line) { logger->error("admin: {}", line); });
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("admin.listen: ") + e.what());
  }
}

AdminServer::~AdminServer() {
  if (impl_->server) impl_->server->Stop();
}

void AdminServer::Start() { impl_->server->Start(); }

int AdminServer::port() const { return impl_->server->port(); }

void AdminServer::SetTokens(std::vector<agent::AdminToken> tokens) {
  std::lock_guard lock(impl_->tokens_mutex);
  impl_->tokens = std::move(tokens);
}

}  // namespace outbox::daemon
