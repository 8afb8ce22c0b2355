#include <gtest/gtest.h>

#include "outbox/store.h"

namespace outbox::store {
namespace {

RetryPolicy NoJitter(Backoff backoff) {
  RetryPolicy policy;
  policy.backoff = backoff;
  policy.first_interval_ms = 1000;
  policy.max_interval_ms = 86'400'000;
  policy.jitter = 0.0;
  return policy;
}

TEST(RetryPolicy, FixedUsesTheFirstIntervalEveryTime) {
  const RetryPolicy policy = NoJitter(Backoff::kFixed);
  for (int failures : {1, 2, 5, 30}) {
    EXPECT_EQ(RetryDelayMs(policy, failures, 0.5), 1000) << failures;
  }
}

TEST(RetryPolicy, ExponentialDoublesPerFailure) {
  const RetryPolicy policy = NoJitter(Backoff::kExponential);
  const std::pair<int, std::int64_t> table[] = {
      {1, 1000}, {2, 2000}, {3, 4000}, {4, 8000}, {10, 512000}};
  for (const auto& [failures, expected] : table) {
    EXPECT_EQ(RetryDelayMs(policy, failures, 0.5), expected) << failures;
  }
}

TEST(RetryPolicy, ExponentialIsCapped) {
  RetryPolicy policy = NoJitter(Backoff::kExponential);
  EXPECT_EQ(RetryDelayMs(policy, 40, 0.5), 86'400'000);
  EXPECT_EQ(RetryDelayMs(policy, 5000, 0.5), 86'400'000);  // no overflow
  policy.max_interval_ms = 3000;
  EXPECT_EQ(RetryDelayMs(policy, 3, 0.5), 3000);
}

TEST(RetryPolicy, JitterStaysWithinItsBounds) {
  RetryPolicy policy = NoJitter(Backoff::kFixed);
  policy.first_interval_ms = 10'000;
  policy.jitter = 0.2;
  EXPECT_EQ(RetryDelayMs(policy, 1, 0.0), 8000);
  EXPECT_EQ(RetryDelayMs(policy, 1, 0.5), 10'000);
  for (double u = 0.0; u < 1.0; u += 0.01) {
    const std::int64_t delay = RetryDelayMs(policy, 1, u);
    EXPECT_GE(delay, 8000);
    EXPECT_LE(delay, 12'000);
  }
}

TEST(RetryPolicy, JitterNeverExceedsTheCap) {
  RetryPolicy policy = NoJitter(Backoff::kExponential);
  policy.jitter = 1.0;
  policy.max_interval_ms = 5000;
  EXPECT_LE(RetryDelayMs(policy, 20, 0.999), 5000);
}

TEST(RetryPolicy, AttemptsExhaustedAtMaxAttempts) {
  RetryPolicy policy;
  policy.max_attempts = 3;
  EXPECT_FALSE(AttemptsExhausted(policy, 2));
  EXPECT_TRUE(AttemptsExhausted(policy, 3));
  EXPECT_TRUE(AttemptsExhausted(policy, 4));
}

TEST(RetryPolicy, AgeBudgetIsOffByDefault) {
  RetryPolicy policy;
  EXPECT_FALSE(AgeExhausted(policy, 0, 1'000'000'000'000));
  policy.max_age_ms = 60'000;
  constexpr std::int64_t kT = 1'760'000'000'000;  // 2025-10-09
  EXPECT_FALSE(AgeExhausted(policy, kT, kT + 60'000));
  EXPECT_TRUE(AgeExhausted(policy, kT, kT + 60'001));
}

// A device without a battery-backed clock boots near 1970; NTP then sets the
// clock to today. Rows created before that must not all be too old at once.
TEST(RetryPolicy, AgeIsUnknownForTimesBeforeTheClockWasSet) {
  RetryPolicy policy;
  policy.max_age_ms = 3'600'000;
  constexpr std::int64_t kToday = 1'780'000'000'000;
  constexpr std::int64_t kBootedIn1970 = 120'000;  // two minutes after the epoch
  EXPECT_FALSE(AgeExhausted(policy, kBootedIn1970, kToday));          // created before the jump
  EXPECT_FALSE(AgeExhausted(policy, kBootedIn1970, kBootedIn1970 + 7'200'000));  // still 1970
  EXPECT_FALSE(AgeExhausted(policy, kSaneWallFloorMs - 1, kToday));
  // From the floor on, a time is a date again and the budget applies.
  EXPECT_TRUE(AgeExhausted(policy, kSaneWallFloorMs, kToday));
  EXPECT_TRUE(AgeExhausted(policy, kToday - 3'600'001, kToday));
}

TEST(RetryPolicy, RowValuesOverrideTopicDefaults) {
  RetryPolicy topic;
  RetryOverride row;
  row.max_attempts = 2;
  row.backoff = Backoff::kFixed;
  row.first_interval_ms = 50;
  const RetryPolicy effective = EffectivePolicy(topic, row);
  EXPECT_EQ(effective.max_attempts, 2);
  EXPECT_EQ(effective.backoff, Backoff::kFixed);
  EXPECT_EQ(effective.first_interval_ms, 50);
  EXPECT_EQ(effective.max_interval_ms, topic.max_interval_ms);
}

TEST(RetryPolicy, NonsenseRowValuesFallBackToTheTopic) {
  RetryPolicy topic;
  RetryOverride row;
  row.max_attempts = -5;
  row.first_interval_ms = 0;
  const RetryPolicy effective = EffectivePolicy(topic, row);
  EXPECT_EQ(effective.max_attempts, topic.max_attempts);
  EXPECT_EQ(effective.first_interval_ms, topic.first_interval_ms);
}

TEST(RetryPolicy, DueWhenPastOrImpossiblyFarAhead) {
  const std::int64_t now = 1'700'000'000'000;
  const std::int64_t cap = 86'400'000;
  EXPECT_TRUE(IsDue(now - 1, now, cap));
  EXPECT_TRUE(IsDue(now, now, cap));
  EXPECT_FALSE(IsDue(now + 1000, now, cap));
  EXPECT_FALSE(IsDue(now + cap, now, cap));
  // The clock was set back by a year after this row was scheduled.
  EXPECT_TRUE(IsDue(now + 365LL * cap, now, cap));
}

TEST(RetryPolicy, ValidateNamesTheField) {
  RetryPolicy policy;
  policy.max_attempts = 0;
  try {
    Validate(policy);
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("max_attempts"), std::string::npos);
  }
  policy = RetryPolicy{};
  policy.jitter = 1.5;
  EXPECT_THROW(Validate(policy), std::invalid_argument);
  policy = RetryPolicy{};
  policy.max_interval_ms = 10;
  EXPECT_THROW(Validate(policy), std::invalid_argument);
  EXPECT_NO_THROW(Validate(RetryPolicy{}));
}

TEST(RetryPolicy, BackoffNamesRoundTrip) {
  EXPECT_EQ(ParseBackoff(BackoffName(Backoff::kFixed)), Backoff::kFixed);
  EXPECT_EQ(ParseBackoff(BackoffName(Backoff::kExponential)), Backoff::kExponential);
  EXPECT_EQ(ParseBackoff("linear"), std::nullopt);
}

}  // namespace
}  // namespace outbox::store
