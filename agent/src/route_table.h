// Routes by topic: each with its handler, its endpoint's breaker and its
// worker pool, and which topics the sweeper serves now. Not installed.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "breaker.h"
#include "completion.h"
#include "outbox/agent.h"
#include "pool.h"
#include "rate_limiter.h"

namespace outbox::agent {

// How a topic's endpoint is named in metrics labels, logs and --print: its
// URL without the query, or only scheme://host:port when the URL is a
// secret (TopicOptions::url_is_secret).
std::string EndpointLabel(const TopicOptions& topic);

struct Route {
  std::string name;  // the config key: a topic or "*"
  // The kind of sink, for metric labels: "http", "nats", "mqtt", or
  // "handler" for a custom Handler.
  std::string sink;
  TopicOptions options;
  std::shared_ptr<Handler> handler;
  // Completion hooks, shared with the writer tasks that run them.
  std::shared_ptr<const RouteHooks> hooks;
  std::shared_ptr<Breaker> breaker;  // shared by every route to the same endpoint
  std::unique_ptr<WorkerPool> pool;
  // The topic's rate limit, shared process-wide; null = none.
  std::shared_ptr<TokenBucket> bucket;
  // The pool refused rows: wake the sweeper when it has room again.
  std::atomic<bool> backlog{false};
};

// Built by Start() and torn down by Stop(); between the two the set of routes
// is fixed, so lookups need no lock. Only the breaker list is read
// concurrently (Snapshot), under its own mutex.
class RouteTable {
 public:
  explicit RouteTable(std::shared_ptr<Clock> clock) : clock_(std::move(clock)) {}

  // One route per configured topic and per custom handler, replacing any
  // earlier Build's (a Start after a failed Start). Throws
  // std::invalid_argument naming the topic when its endpoint is unusable.
  void Build(const std::map<std::string, TopicOptions, std::less<>>& topics,
             const std::map<std::string, std::shared_ptr<Handler>, std::less<>>& handlers);
  // Drops every route and breaker (after the pools were joined).
  void Clear();

  // The topic's own route, else "*", else null.
  Route* For(std::string_view topic) const;
  bool empty() const { return routes_.empty(); }
  std::size_t size() const { return routes_.size(); }
  const std::map<std::string, std::unique_ptr<Route>, std::less<>>& routes() const {
    return routes_;
  }
  // Route names for the metrics labels.
  std::vector<std::string> Names() const;

  // What the sweeper serves: every configured topic, plus each topic of
  // `pending_topics` that only "*" routes, highest priority first;
  // `unrouted` gets the pending topics nothing routes.
  struct Served {
    std::vector<std::pair<Route*, std::string>> topics;
    std::vector<std::string> unrouted;
  };
  Served ToServe(std::vector<std::string> pending_topics) const;

  // Thread-safe.
  std::vector<BreakerState> BreakerStates() const;

 private:
  std::shared_ptr<Breaker> BreakerFor(const std::string& endpoint, const TopicOptions& topic);

  const std::shared_ptr<Clock> clock_;
  std::map<std::string, std::unique_ptr<Route>, std::less<>> routes_;
  Route* wildcard_ = nullptr;
  mutable std::mutex breakers_mutex_;
  std::map<std::string, std::shared_ptr<Breaker>> breakers_;  // by endpoint; guarded
};

}  // namespace outbox::agent
