// Configs that just work: a default never makes a user's value fail; it
// moves to fit and says so. Only values the user wrote are refused.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <string>

#include "outbox/agent.h"

namespace outbox::agent {
namespace {

bool Mentions(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& line) { return line == text; });
}

TEST(ConfigDefaults, ShortLeaseLowersTheDefaultTimeoutInsteadOfFailing) {
  const Config config =
      ParseConfig(R"({"lease_timeout_ms": 2000, "topics": {"*": {"url": "http://h/"}}})");
  EXPECT_EQ(config.options.lease_timeout_ms, 2000);
  EXPECT_EQ(config.options.topics.at("*").endpoint.timeout_ms, 1000);
  EXPECT_TRUE(Mentions(config.adjustments,
                       R"(topics."*".timeout_ms: 1000 (default 5000 lowered to half of )"
                       "lease_timeout_ms)"))
      << testing::PrintToString(config.adjustments);
}

TEST(ConfigDefaults, LongTimeoutRaisesTheDefaultLease) {
  const Config config =
      ParseConfig(R"({"topics": {"a": {"url": "http://h/", "timeout_ms": 200000}}})");
  EXPECT_EQ(config.options.lease_timeout_ms, 400000);
  EXPECT_EQ(config.options.topics.at("a").endpoint.timeout_ms, 200000);
  EXPECT_TRUE(Mentions(config.adjustments,
                       "lease_timeout_ms: 400000 (default 180000 raised to twice the longest "
                       "timeout_ms)"));
}

TEST(ConfigDefaults, ATimeoutTheUserWroteIsStillRefusedAgainstTheirLease) {
  try {
    ParseConfig(
        R"({"lease_timeout_ms": 2000, "topics": {"a": {"url": "http://h/", "timeout_ms": 3000}}})");
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), R"(topics."a".timeout_ms: must be less than lease_timeout_ms (2000))");
  }
}

TEST(ConfigDefaults, RetryAndBreakerDefaultsFollowTheWrittenSide) {
  const Config config = ParseConfig(R"({"topics": {
      "a": {"url": "http://h/", "retry": {"first_interval_ms": 100000000},
            "breaker": {"open_ms": 400000}},
      "b": {"url": "http://h/", "retry": {"max_interval_ms": 500},
            "breaker": {"max_open_ms": 1000}}}})");
  const TopicOptions& a = config.options.topics.at("a");
  const TopicOptions& b = config.options.topics.at("b");
  EXPECT_EQ(a.retry.max_interval_ms, 100000000);
  EXPECT_EQ(a.breaker.max_open_ms, 400000);
  EXPECT_EQ(b.retry.first_interval_ms, 500);
  EXPECT_EQ(b.breaker.open_ms, 1000);
  EXPECT_EQ(config.adjustments.size(), 4u);
  EXPECT_TRUE(Mentions(config.adjustments,
                       R"(topics."b".retry.first_interval_ms: 500 (default 1000 lowered to )"
                       "max_interval_ms)"));
  // The library accepts what the parser produced.
  Options options = config.options;
  options.db_path = "x.db";
  EXPECT_NO_THROW(Validate(options));
}

TEST(ConfigDefaults, NothingToAdjustInAPlainConfig) {
  EXPECT_TRUE(ParseConfig(R"({"topics": {"a": {"url": "http://h/"}}})").adjustments.empty());
}

TEST(ConfigDefaults, MetricsMaxTopicsIsReadAndChecked) {
  EXPECT_EQ(ParseConfig(R"({"topics": {"a": {"url": "http://h/"}}})").options.metrics_max_topics,
            100);
  EXPECT_EQ(ParseConfig(R"({"metrics": {"max_topics": 7}, "topics": {"a": {"url": "http://h/"}}})")
                .options.metrics_max_topics,
            7);
  try {
    ParseConfig(R"({"metrics": {"max_topics": -1}, "topics": {"a": {"url": "http://h/"}}})");
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "metrics.max_topics: expected an integer from 0 to 10000, got -1");
  }
}

TEST(ConfigDefaults, ArchiveKeepIsReadCheckedAndPrinted) {
  const Config config = ParseConfig(
      R"({"retention": {"archive_keep": 3}, "topics": {"a": {"url": "http://h/"}}})");
  EXPECT_EQ(config.options.retention.archive_keep, 3);
  EXPECT_NE(EffectiveConfigJson(config).find(R"("archive_keep": 3)"), std::string::npos);
  EXPECT_EQ(ParseConfig(R"({"topics": {"a": {"url": "http://h/"}}})").options.retention.archive_keep,
            7);
  try {
    ParseConfig(R"({"retention": {"archive_keep": 1001}, "topics": {"a": {"url": "http://h/"}}})");
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "retention.archive_keep: expected an integer from 0 to 1000, got 1001");
  }
}

TEST(EffectiveConfigJson, ShowsDefaultsAndAdjustedValuesButNoSecret) {
  ::setenv("OUTBOX_TEST_PRINT_TOKEN", "Bearer s3cr3t-token", 1);
  const Config config = ParseConfig(R"({"lease_timeout_ms": 2000, "topics": {
      "*": {"url": "https://h.example/in?token=q7uery",
            "headers": {"Authorization": "env:OUTBOX_TEST_PRINT_TOKEN"},
            "signing_secret": "whsec_MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1u"},
      "n": {"url": "nats://h:4222/s", "nats": {"user": "u", "password": "inl1ne-pw"}}}})");
  ::unsetenv("OUTBOX_TEST_PRINT_TOKEN");
  const std::string json = EffectiveConfigJson(config);
  for (const char* secret : {"s3cr3t", "q7uery", "MDEyMzQ1", "inl1ne-pw"}) {
    EXPECT_EQ(json.find(secret), std::string::npos) << secret << " in\n" << json;
  }
  for (const char* shown :
       {R"("timeout_ms": 1000)", R"("lease_timeout_ms": 2000)", R"("max_topics": 100)",
        R"("max_attempts": 8)", R"("delivered_ms": 604800000)", R"("Authorization": "<redacted>")",
        R"("url": "https://h.example/in?<redacted>")", R"("user": "u")",
        R"("password": "<redacted>")"}) {
    EXPECT_NE(json.find(shown), std::string::npos) << shown << " not in\n" << json;
  }
}

TEST(EffectiveConfigJson, ShowsEveryTopicAttributeThatWasSet) {
  const Config config = ParseConfig(R"({"topics": {"o": {"url": "http://h/in",
      "dataschema": "urn:s:{schema_version}", "compression": "gzip",
      "url_by_schema_version": {"2": "http://h/v2?k=tok"}, "priority": 3,
      "ttl_ms": 60000, "on_delivered": "UPDATE orders SET sent = 1 WHERE id = :key",
      "ordering": {"by": "key", "dead_head": "skip"},
      "rate_limit": {"messages_per_s": 50, "bytes_per_s": 100000}}}})");
  const std::string json = EffectiveConfigJson(config);
  for (const char* shown :
       {R"("dataschema": "urn:s:{schema_version}")", R"("compression": "gzip")",
        R"("compress_min_bytes": 1024)", R"("2": "http://h/v2?<redacted>")",
        R"("priority": 3)", R"("ttl_ms": 60000)",
        R"("on_delivered": "UPDATE orders SET sent = 1 WHERE id = :key")", R"("by": "key")",
        R"("dead_head": "skip")", R"("messages_per_s": 50)", R"("bytes_per_s": 100000)"}) {
    EXPECT_NE(json.find(shown), std::string::npos) << shown << " not in\n" << json;
  }
  EXPECT_EQ(json.find("tok"), std::string::npos) << json;
  EXPECT_EQ(json.find("on_dead"), std::string::npos) << "an absent hook is not printed";
}

}  // namespace
}  // namespace outbox::agent
