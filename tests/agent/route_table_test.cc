#include "route_table.h"

#include <gtest/gtest.h>

namespace outbox::agent {
namespace {

class NoopHandler final : public Handler {
 public:
  HandlerResult Handle(const Delivery&) override { return {}; }
};

using Handlers = std::map<std::string, std::shared_ptr<Handler>, std::less<>>;
using Topics = std::map<std::string, TopicOptions, std::less<>>;

TopicOptions Http(const std::string& url) {
  TopicOptions topic;
  topic.endpoint.url = url;
  return topic;
}

std::vector<std::string> TopicNames(const RouteTable::Served& served) {
  std::vector<std::string> names;
  for (const auto& [route, topic] : served.topics) names.push_back(route->name + ":" + topic);
  return names;
}

TEST(RouteTable, ServesConfiguredTopicsAndReportsUnroutedOnes) {
  RouteTable routes(SystemClock());
  routes.Build(Topics{}, Handlers{{"a", std::make_shared<NoopHandler>()},
                                  {"b", std::make_shared<NoopHandler>()}});
  EXPECT_EQ(routes.For("a")->name, "a");
  EXPECT_EQ(routes.For("c"), nullptr);
  const auto served = routes.ToServe({"a", "c", "d"});
  EXPECT_EQ(TopicNames(served), (std::vector<std::string>{"a:a", "b:b"}));
  EXPECT_EQ(served.unrouted, (std::vector<std::string>{"c", "d"}));
}

TEST(RouteTable, TheWildcardServesEveryPendingTopicWithoutItsOwnRoute) {
  RouteTable routes(SystemClock());
  routes.Build(Topics{}, Handlers{{"a", std::make_shared<NoopHandler>()},
                                  {"*", std::make_shared<NoopHandler>()}});
  EXPECT_EQ(routes.For("zzz")->name, "*");
  const auto served = routes.ToServe({"a", "c"});
  EXPECT_EQ(TopicNames(served), (std::vector<std::string>{"a:a", "*:c"}));
  EXPECT_TRUE(served.unrouted.empty());
}

// A Start() that threw after building its routes may be called again: the
// second Build replaces every route, and the wildcard is the new "*".
TEST(RouteTable, BuildingAgainReplacesEveryRouteAndTheWildcard) {
  RouteTable routes(SystemClock());
  const Handlers handlers{{"a", std::make_shared<NoopHandler>()},
                          {"*", std::make_shared<NoopHandler>()}};
  routes.Build(Topics{}, handlers);
  routes.Build(Topics{}, handlers);
  ASSERT_EQ(routes.size(), 2u);
  EXPECT_EQ(routes.For("zzz"), routes.routes().at("*").get());
  EXPECT_EQ(routes.For("zzz")->name, "*");
}

TEST(RouteTable, ABuildAfterOneThatThrewKeepsNothingOfIt) {
  RouteTable routes(SystemClock());
  EXPECT_THROW(routes.Build(Topics{{"*", Http("http://127.0.0.1:1/x")}, {"z", TopicOptions{}}},
                            Handlers{}),
               std::invalid_argument);
  routes.Build(Topics{}, Handlers{{"a", std::make_shared<NoopHandler>()}});
  EXPECT_EQ(routes.size(), 1u);
  EXPECT_EQ(routes.For("zzz"), nullptr);  // the failed build's "*" is gone
  EXPECT_EQ(routes.BreakerStates().size(), 1u);
}

TEST(RouteTable, TopicsOfOneEndpointShareABreakerWhateverTheQuery) {
  RouteTable routes(SystemClock());
  routes.Build(Topics{{"a", Http("http://127.0.0.1:1/x?token=1")},
                      {"b", Http("http://127.0.0.1:1/x?token=2")},
                      {"c", Http("http://127.0.0.1:1/y")}},
               Handlers{});
  EXPECT_EQ(routes.For("a")->breaker, routes.For("b")->breaker);
  EXPECT_NE(routes.For("a")->breaker, routes.For("c")->breaker);
  const auto states = routes.BreakerStates();
  ASSERT_EQ(states.size(), 2u);
  for (const auto& state : states) EXPECT_EQ(state.endpoint.find('?'), std::string::npos);
  routes.Clear();
  EXPECT_TRUE(routes.BreakerStates().empty());
  EXPECT_EQ(routes.For("a"), nullptr);
}

TEST(RouteTable, ATopicWithoutUrlOrHandlerIsRejectedByName) {
  RouteTable routes(SystemClock());
  try {
    routes.Build(Topics{{"orders", TopicOptions{}}}, Handlers{});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "topics.\"orders\".url: required");
  }
}

}  // namespace
}  // namespace outbox::agent
