// The outcome rules as a table: no HTTP, no database, no clock.
#include "outcome.h"

#include <gtest/gtest.h>

#include <cctype>
#include <limits>

namespace outbox::agent {
namespace {

// A real date: wall times before store::kSaneWallFloorMs are no dates.
constexpr std::int64_t kNow = 1'760'000'000'000;

struct Case {
  const char* name;
  int attempts;                 // the row's attempts before this send
  std::int64_t created_at;      // the row's created_at
  std::optional<std::int64_t> last_attempt_at;
  HandlerResult result;
  EndpointHealth health;
  Action action;
  bool cost;
  std::int64_t delay_ms;        // kReschedule only
  std::string error_starts;     // prefix of the error
  bool gone = false;
  bool endpoint_failure = false;
  bool configuration = false;
};

HandlerResult Answer(Outcome outcome, int status, bool gone = false,
                     std::optional<std::int64_t> retry_after = std::nullopt) {
  return {outcome, status, gone, retry_after, ""};
}

// Acknowledged something after the row's last attempt: failures cost it.
const EndpointHealth kHealthy{true, kNow - 10, false};
const EndpointHealth kNoAckSince{true, 0, false};
const EndpointHealth kProbe{false, kNow - 10, false};
const EndpointHealth kStopping{true, kNow - 10, true};

const Case kCases[] = {
    {"delivered", 0, kNow - 100, {}, Answer(Outcome::kDelivered, 200), kHealthy,
     Action::kComplete, false, 0, ""},
    {"message failure is dead at once", 0, kNow - 100, {}, Answer(Outcome::kMessageFailure, 400),
     kHealthy, Action::kDead, true, 0, "HTTP 400"},
    {"410 reschedules without cost and retires the endpoint", 5, kNow - 100, {},
     Answer(Outcome::kMessageFailure, 410, true), kHealthy, Action::kReschedule, false, 16'000,
     "HTTP 410: endpoint gone", true},
    {"endpoint failure after an ack costs an attempt", 1, kNow - 100, kNow - 50,
     Answer(Outcome::kEndpointFailure, 503), kHealthy, Action::kReschedule, true, 2000, "HTTP 503",
     false, true},
    {"outage without any ack since costs nothing", 1, kNow - 100, kNow - 50,
     Answer(Outcome::kEndpointFailure, 503), kNoAckSince, Action::kReschedule, false, 1000,
     "HTTP 503", false, true},
    {"a probe costs nothing", 1, kNow - 100, {}, Answer(Outcome::kEndpointFailure, 503), kProbe,
     Action::kReschedule, false, 1000, "HTTP 503", false, true},
    {"429 costs nothing and honours Retry-After", 0, kNow - 100, {},
     Answer(Outcome::kEndpointFailure, 429, false, 5000), kHealthy, Action::kReschedule, false,
     5000, "HTTP 429", false, true},
    {"Retry-After is capped by max_interval_ms", 0, kNow - 100, {},
     Answer(Outcome::kEndpointFailure, 503, false, 999'999'999), kNoAckSince, Action::kReschedule,
     false, 60'000, "HTTP 503", false, true},
    {"401 opens the breaker at once without cost", 0, kNow - 100, {},
     Answer(Outcome::kEndpointFailure, 401), kHealthy, Action::kReschedule, false, 1000, "HTTP 401",
     false, true, true},
    {"our own stop reverts", 0, kNow - 100, {}, Answer(Outcome::kEndpointFailure, 0), kStopping,
     Action::kRevert, false, 0, ""},
    {"the last attempt goes dead", 3, kNow - 100, kNow - 50,
     Answer(Outcome::kEndpointFailure, 503), kHealthy, Action::kDead, true, 0,
     "HTTP 503 (after 4 attempts)", false, true},
    {"a negative attempts column counts as none", -7, kNow - 100, kNow - 50,
     Answer(Outcome::kEndpointFailure, 503), kHealthy, Action::kReschedule, true, 1000, "HTTP 503",
     false, true},
    {"past max_age_ms a costly failure is dead", 0, kNow - 20'000, kNow - 50,
     Answer(Outcome::kEndpointFailure, 503), kHealthy, Action::kDead, true, 0,
     "HTTP 503 (older than retry.max_age_ms)", false, true},
};

class DecideTest : public ::testing::TestWithParam<Case> {};

TEST_P(DecideTest, FollowsTheOutcomeRules) {
  const Case& c = GetParam();
  store::Row row;
  row.id = 7;
  row.topic = "t";
  row.attempts = c.attempts;
  row.created_at = c.created_at;
  row.last_attempt_at = c.last_attempt_at;
  store::RetryPolicy policy;
  policy.first_interval_ms = 1000;
  policy.max_interval_ms = 60'000;
  policy.max_attempts = 4;
  policy.jitter = 0;
  policy.max_age_ms = 10'000;
  const Decision d = Decide(row, c.result, c.health, policy, kNow, 0.5);
  EXPECT_EQ(d.action, c.action);
  EXPECT_EQ(d.count_attempt, c.cost);
  if (c.action == Action::kReschedule) {
    EXPECT_EQ(d.delay_ms, c.delay_ms);
    EXPECT_EQ(d.next_attempt_at, kNow + c.delay_ms);
  }
  EXPECT_EQ(d.error.rfind(c.error_starts, 0), 0u) << d.error;
  EXPECT_EQ(d.endpoint_gone, c.gone);
  EXPECT_EQ(d.endpoint_failure, c.endpoint_failure);
  EXPECT_EQ(d.configuration_failure, c.configuration);
}

INSTANTIATE_TEST_SUITE_P(Outcome, DecideTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& param) {
                           std::string name = param.param.name;
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

TEST(Outcome, PerRowOverrideBeatsTheTopicPolicy) {
  store::Row row;
  row.attempts = 0;
  row.created_at = kNow - 100;
  row.retry.max_attempts = 1;
  store::RetryPolicy policy;
  policy.jitter = 0;
  const Decision d =
      Decide(row, Answer(Outcome::kEndpointFailure, 503), kHealthy, policy, kNow, 0.5);
  EXPECT_EQ(d.action, Action::kDead);
}

TEST(Outcome, LongErrorsAreCutToTheLimit) {
  HandlerResult result = Answer(Outcome::kMessageFailure, 400);
  result.error = std::string(5000, 'x');
  const Decision d = Decide(store::Row{}, result, kHealthy, store::RetryPolicy{}, kNow, 0.5);
  EXPECT_EQ(d.error.size(), kMaxErrorBytes);
}

TEST(TruncateError, NeverCutsInsideAUtf8Sequence) {
  // "é" is two bytes, "😀" four: a plain resize would keep a lead byte alone.
  const std::string two = std::string(kMaxErrorBytes - 1, 'a') + "\xC3\xA9" + "b";
  EXPECT_EQ(TruncateError(two), std::string(kMaxErrorBytes - 1, 'a'));
  for (std::size_t keep = 1; keep <= 3; ++keep) {
    const std::string four = std::string(kMaxErrorBytes - keep, 'a') + "\xF0\x9F\x98\x80" + "b";
    EXPECT_EQ(TruncateError(four), std::string(kMaxErrorBytes - keep, 'a')) << keep;
  }
  const std::string fits = std::string(kMaxErrorBytes - 2, 'a') + "\xC3\xA9" + "b";
  EXPECT_EQ(TruncateError(fits), std::string(kMaxErrorBytes - 2, 'a') + "\xC3\xA9");
  EXPECT_EQ(TruncateError("short"), "short");
}

TEST(AttemptsPlus, SaturatesInsteadOfOverflowing) {
  EXPECT_EQ(AttemptsPlus(std::numeric_limits<int>::max(), 1), std::numeric_limits<int>::max());
  EXPECT_EQ(AttemptsPlus(-3, 1), 1);
  EXPECT_EQ(AttemptsPlus(2, 0), 2);
}

}  // namespace
}  // namespace outbox::agent
