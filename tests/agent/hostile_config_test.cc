// Config values that feed arithmetic: every millisecond option has an upper
// bound, so that no sum or product on it can overflow.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "option_limits.h"
#include "outbox/agent.h"

namespace outbox::agent {
namespace {

std::string TopicWith(const std::string& fields) {
  return R"({"topics": {"a": {"url": "https://receiver.example/events", )" + fields + "}}}";
}

TEST(HostileConfig, EveryMillisecondOptionHasAnUpperBound) {
  const std::string huge = "9223372036854775807";
  const std::string over = std::to_string(limits::kMaxMs + 1);
  struct Case {
    std::string key;
    std::string json;  // with VALUE for the number
  };
  const std::vector<Case> cases = {
      {"sweep_interval_ms", R"({"sweep_interval_ms": VALUE, "topics": {}})"},
      {"lease_timeout_ms", R"({"lease_timeout_ms": VALUE, "topics": {}})"},
      {"retention.delivered_ms", R"({"retention": {"delivered_ms": VALUE}, "topics": {}})"},
      {"retention.interval_ms", R"({"retention": {"interval_ms": VALUE}, "topics": {}})"},
      {R"(topics."a".timeout_ms)", TopicWith(R"("timeout_ms": VALUE)")},
      {R"(topics."a".connect_timeout_ms)", TopicWith(R"("connect_timeout_ms": VALUE)")},
      {R"(topics."a".max_retry_after_ms)", TopicWith(R"("max_retry_after_ms": VALUE)")},
      {R"(topics."a".ttl_ms)", TopicWith(R"("ttl_ms": VALUE)")},
      {R"(topics."a".retry.first_interval_ms)", TopicWith(R"("retry": {"first_interval_ms": VALUE})")},
      {R"(topics."a".retry.max_interval_ms)", TopicWith(R"("retry": {"max_interval_ms": VALUE})")},
      {R"(topics."a".retry.max_age_ms)", TopicWith(R"("retry": {"max_age_ms": VALUE})")},
      {R"(topics."a".breaker.open_ms)", TopicWith(R"("breaker": {"open_ms": VALUE})")},
      {R"(topics."a".breaker.max_open_ms)", TopicWith(R"("breaker": {"max_open_ms": VALUE})")},
  };
  for (const Case& c : cases) {
    for (const std::string& value : {huge, over}) {
      std::string json = c.json;
      json.replace(json.find("VALUE"), 5, value);
      try {
        ParseConfig(json);
        ADD_FAILURE() << "accepted " << c.key << " = " << value;
      } catch (const std::invalid_argument& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.rfind(c.key + ": ", 0), 0u) << what;
        EXPECT_NE(what.find(std::to_string(limits::kMaxMs)), std::string::npos) << what;
      }
    }
  }
  // Ten years is still a value.
  EXPECT_EQ(ParseConfig(TopicWith(R"("ttl_ms": )" + std::to_string(limits::kMaxMs)))
                .options.topics.at("a")
                .ttl_ms,
            limits::kMaxMs);
}

}  // namespace
}  // namespace outbox::agent
