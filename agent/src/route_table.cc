#include "route_table.h"

#include <algorithm>

#include "sink_handler.h"

namespace outbox::agent {

std::string EndpointLabel(const TopicOptions& topic) {
  const std::string& url = topic.endpoint.url;
  if (!topic.url_is_secret) return url.substr(0, url.find('?'));
  // The URL was validated (an absolute URL without credentials): the
  // authority ends at the first '/', '?' or '#' after "://".
  const std::size_t scheme = url.find("://");
  if (scheme == std::string::npos) return "<redacted>";
  const std::size_t end = url.find_first_of("/?#", scheme + 3);
  return url.substr(0, end);
}

void RouteTable::Build(
    const std::map<std::string, TopicOptions, std::less<>>& configured,
    const std::map<std::string, std::shared_ptr<Handler>, std::less<>>& handlers) {
  // A Start() that threw after an earlier Build() builds again from nothing:
  // no route, breaker or wildcard of the earlier attempt survives.
  Clear();
  std::map<std::string, TopicOptions, std::less<>> topics = configured;
  for (const auto& [name, handler] : handlers) topics.try_emplace(name);
  for (auto& [name, topic] : topics) {
    auto route = std::make_unique<Route>();
    route->name = name;
    route->options = topic;
    route->hooks = std::make_shared<const RouteHooks>(ResolveHooks(topic.hooks));
    std::string endpoint;
    if (auto custom = handlers.find(name); custom != handlers.end()) {
      route->handler = custom->second;
      route->sink = "handler";
      endpoint = "handler:" + name;
    } else {
      if (topic.endpoint.url.empty()) {
        throw std::invalid_argument("topics.\"" + name + "\".url: required");
      }
      try {
        transport::EndpointOptions endpoint_options = topic.endpoint;
        // on_delivered may store what the receiver answered (its own id).
        if (route->hooks->on_delivered) endpoint_options.response_body_bytes = kMaxResponseBytes;
        route->handler = std::make_shared<SinkHandler>(std::move(endpoint_options),
                                                       topic.url_by_schema_version);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("topics.\"" + name + "\"." + e.what());
      }
      route->sink = transport::SinkKindName(transport::SinkKindOf(topic.endpoint.url));
      endpoint = EndpointLabel(topic);
    }
    route->breaker = BreakerFor(endpoint, topic);
    route->bucket = SharedBucket(name, topic.rate_limit);
    Route* const built = routes_.insert_or_assign(name, std::move(route)).first->second.get();
    if (name == "*") wildcard_ = built;
  }
}

void RouteTable::Clear() {
  routes_.clear();
  wildcard_ = nullptr;
  std::lock_guard lock(breakers_mutex_);
  breakers_.clear();
}

Route* RouteTable::For(std::string_view topic) const {
  const auto it = routes_.find(topic);
  if (it != routes_.end()) return it->second.get();
  return wildcard_;
}

std::vector<std::string> RouteTable::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, route] : routes_) names.push_back(name);
  return names;
}

RouteTable::Served RouteTable::ToServe(std::vector<std::string> pending_topics) const {
  Served served;
  for (const auto& [name, route] : routes_) {
    if (route.get() != wildcard_) served.topics.emplace_back(route.get(), name);
  }
  for (std::string& topic : pending_topics) {
    if (routes_.count(topic) != 0) continue;
    if (wildcard_ != nullptr) {
      served.topics.emplace_back(wildcard_, std::move(topic));
    } else {
      served.unrouted.push_back(std::move(topic));
    }
  }
  // Higher priority first; stable, so equal ones keep their order.
  std::stable_sort(served.topics.begin(), served.topics.end(), [](const auto& a, const auto& b) {
    return a.first->options.priority > b.first->options.priority;
  });
  return served;
}

std::vector<BreakerState> RouteTable::BreakerStates() const {
  std::lock_guard lock(breakers_mutex_);
  std::vector<BreakerState> states;
  for (const auto& [endpoint, breaker] : breakers_) states.push_back(breaker->State());
  return states;
}

std::shared_ptr<Breaker> RouteTable::BreakerFor(const std::string& endpoint,
                                                const TopicOptions& topic) {
  std::lock_guard lock(breakers_mutex_);
  auto& slot = breakers_[endpoint];
  if (!slot) {
    // A probe that never reported (its worker stopped) is forgotten after
    // the longest a send can take.
    slot = std::make_shared<Breaker>(endpoint, topic.breaker, clock_,
                                     2 * topic.endpoint.timeout_ms + 1000);
  }
  return slot;
}

}  // namespace outbox::agent
