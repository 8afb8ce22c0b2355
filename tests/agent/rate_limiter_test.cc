// Rate limits: the token bucket on explicit times, and two Agents of one
// process sharing a topic's limit against a real HTTP server.
#include "rate_limiter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "agent_fixture.h"

namespace outbox::agent::testing {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

TEST(TokenBucket, BurstOfOneSecondThenCallersAreSpacedByTheRate) {
  TokenBucket bucket({.messages_per_s = 10});
  const Steady::time_point t0{};
  EXPECT_EQ(bucket.Reserve(10, 0, t0), microseconds(0));
  EXPECT_EQ(bucket.Reserve(1, 0, t0), milliseconds(100));
  EXPECT_EQ(bucket.Reserve(1, 0, t0), milliseconds(200));
  // A second later the debt of 2 is paid and 8 tokens are back.
  EXPECT_EQ(bucket.Reserve(8, 0, t0 + milliseconds(1000)), microseconds(0));
  EXPECT_EQ(bucket.Reserve(1, 0, t0 + milliseconds(1000)), milliseconds(100));
}

TEST(TokenBucket, BytesLimitOnItsOwnAndTheLongerWaitWins) {
  TokenBucket bucket({.messages_per_s = 100, .bytes_per_s = 1000});
  const Steady::time_point t0{};
  // 3000 bytes: the burst of 1000 and 2 s of debt; messages are plenty.
  EXPECT_EQ(bucket.Reserve(1, 3000, t0), milliseconds(2000));
}

TEST(TokenBucket, RefundGivesBackWhatWasNotSent) {
  TokenBucket bucket({.messages_per_s = 2});
  const Steady::time_point t0{};
  EXPECT_EQ(bucket.Reserve(2, 0, t0), microseconds(0));
  EXPECT_EQ(bucket.Reserve(1, 0, t0), milliseconds(500));
  bucket.Refund(1, 0);
  EXPECT_EQ(bucket.Reserve(1, 0, t0), milliseconds(500));
}

TEST(TokenBucket, NegativeRateIsRefused) {
  EXPECT_THROW(TokenBucket({.messages_per_s = -1}), std::invalid_argument);
}

TEST(SharedBucket, OnePerTopicAndLimitInTheProcessNoneWhenOff) {
  const auto a = SharedBucket("rate.shared", {.messages_per_s = 5});
  EXPECT_EQ(SharedBucket("rate.shared", {.messages_per_s = 5}), a);
  EXPECT_NE(SharedBucket("rate.shared", {.messages_per_s = 6}), a);
  EXPECT_NE(SharedBucket("rate.other", {.messages_per_s = 5}), a);
  EXPECT_EQ(SharedBucket("rate.shared", {}), nullptr);
}

class RateLimitTest : public AgentTest {};

TEST_F(RateLimitTest, TwoAgentsOfOneProcessShareTheTopicsLimit) {
  server_.Post("/events",
               [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  server_.Start();
  constexpr int kMessages = 30;
  constexpr double kRate = 10;
  Options options = BaseOptions();
  options.sweep_interval_ms = 20;
  TopicOptions topic = HttpTopic();
  topic.workers = 4;
  topic.rate_limit.messages_per_s = kRate;
  options.topics["rated"] = topic;
  Agent first(options);
  Agent second(options);
  first.Start();
  second.Start();
  const auto start = Steady::now();
  for (int i = 0; i < kMessages; ++i) {
    Commit(i % 2 == 0 ? &first : &second, "rated", std::to_string(i));
  }
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == kMessages; },
                      std::chrono::seconds(30)));
  const double elapsed_s = std::chrono::duration<double>(Steady::now() - start).count();
  first.Stop();
  second.Stop();
  // One second's burst, then kRate per second for both agents together: a
  // lower bound only (a slow machine can take longer, never less).
  EXPECT_GE(elapsed_s, (kMessages - kRate) / kRate * 0.9);
  EXPECT_EQ(server_.requests().size(), static_cast<std::size_t>(kMessages));
}

TEST_F(RateLimitTest, StopEndsAWaitForTokensAndGivesTheRowsBack) {
  server_.Post("/events",
               [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  server_.Start();
  Options options = BaseOptions();
  TopicOptions topic = HttpTopic();
  topic.workers = 1;
  topic.rate_limit.messages_per_s = 1;  // the n-th message waits n-1 seconds
  options.topics["slow.rated"] = topic;
  Agent agent(options);
  agent.Start();
  for (const char* key : {"a", "b", "c", "d", "e", "f"}) Commit(&agent, "slow.rated", key);
  ASSERT_TRUE(WaitFor([&] { return server_.requests().size() >= 1; }));
  const auto before = Steady::now();
  agent.Stop(std::chrono::seconds(30));
  // The stop did not sit out the waits (five more messages at 1/s: 5 s).
  EXPECT_LT(std::chrono::duration<double>(Steady::now() - before).count(), 3.0);
  EXPECT_EQ(CountStatus(store::Status::kDelivered) + CountStatus(store::Status::kPending), 6);
}

}  // namespace
}  // namespace outbox::agent::testing
