#include "breaker.h"

#include <gtest/gtest.h>

namespace outbox::agent {
namespace {

using namespace std::chrono_literals;

// Monotonic time moves only when the test says so.
class ManualClock final : public Clock {
 public:
  std::int64_t WallMs() override { return 0; }
  std::chrono::steady_clock::time_point Monotonic() override { return now_; }
  void Advance(std::chrono::milliseconds by) { now_ += by; }

 private:
  std::chrono::steady_clock::time_point now_{};
};

class BreakerTest : public ::testing::Test {
 protected:
  BreakerTest() : breaker_("http://receiver/events", Options(), clock_, 30'000) {}
  static BreakerOptions Options() {
    BreakerOptions options;
    options.failure_threshold = 3;
    options.open_ms = 1000;
    options.max_open_ms = 3000;
    return options;
  }
  void FailUntilOpen() {
    while (!breaker_.OnFailure(false)) {
    }
  }
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  Breaker breaker_;
};

TEST_F(BreakerTest, OpensAfterTheThresholdOfConsecutiveFailures) {
  EXPECT_FALSE(breaker_.OnFailure(false));
  EXPECT_FALSE(breaker_.OnFailure(false));
  EXPECT_TRUE(breaker_.IsClosed());
  EXPECT_TRUE(breaker_.OnFailure(false));
  EXPECT_EQ(breaker_.mode(), Breaker::Mode::kOpen);
  EXPECT_EQ(breaker_.Acquire(), Breaker::Permit::kDenied);
  EXPECT_EQ(breaker_.State().state, "open");
}

TEST_F(BreakerTest, ASuccessResetsTheFailureCount) {
  breaker_.OnFailure(false);
  breaker_.OnFailure(false);
  EXPECT_FALSE(breaker_.OnSuccess(5));  // it was closed: nothing to report
  EXPECT_FALSE(breaker_.OnFailure(false));
  EXPECT_TRUE(breaker_.IsClosed());
  EXPECT_EQ(breaker_.last_ack_wall_ms(), 5);
}

TEST_F(BreakerTest, AConfigurationFailureOpensAtOnce) {
  EXPECT_TRUE(breaker_.OnFailure(true));
  EXPECT_FALSE(breaker_.IsClosed());
}

TEST_F(BreakerTest, AfterTheOpenPeriodExactlyOneProbeGoesOut) {
  FailUntilOpen();
  clock_->Advance(999ms);
  EXPECT_EQ(breaker_.Acquire(), Breaker::Permit::kDenied);
  clock_->Advance(1ms);
  EXPECT_EQ(breaker_.Acquire(), Breaker::Permit::kProbe);
  EXPECT_EQ(breaker_.State().state, "half_open");
  EXPECT_EQ(breaker_.Acquire(), Breaker::Permit::kDenied);
  EXPECT_TRUE(breaker_.OnSuccess(10));
  EXPECT_EQ(breaker_.Acquire(), Breaker::Permit::kSend);
  EXPECT_EQ(breaker_.State().state, "closed");
}

TEST_F(BreakerTest, AFailedProbeDoublesTheOpenPeriodUpToTheCap) {
  FailUntilOpen();
  const std::chrono::milliseconds expected[] = {2000ms, 3000ms, 3000ms};
  clock_->Advance(1000ms);
  for (auto period : expected) {
    ASSERT_EQ(breaker_.Acquire(), Breaker::Permit::kProbe);
    EXPECT_TRUE(breaker_.OnFailure(false));
    clock_->Advance(period - 1ms);
    EXPECT_EQ(breaker_.Acquire(), Breaker::Permit::kDenied) << period.count();
    clock_->Advance(1ms);
  }
}

TEST_F(BreakerTest, ACancelledProbeLetsTheNextOneGo) {
  FailUntilOpen();
  clock_->Advance(1000ms);
  ASSERT_EQ(breaker_.Acquire(), Breaker::Permit::kProbe);
  breaker_.CancelProbe();
  EXPECT_EQ(breaker_.Acquire(), Breaker::Permit::kProbe);
}

TEST_F(BreakerTest, AProbeThatNeverAnsweredIsForgottenAfterItsTimeout) {
  FailUntilOpen();
  clock_->Advance(1000ms);
  ASSERT_EQ(breaker_.Acquire(), Breaker::Permit::kProbe);
  clock_->Advance(29'999ms);
  EXPECT_EQ(breaker_.Acquire(), Breaker::Permit::kDenied);
  clock_->Advance(1ms);
  EXPECT_EQ(breaker_.Acquire(), Breaker::Permit::kProbe);
}

TEST_F(BreakerTest, AnswersToSendsStartedBeforeItOpenedDoNotExtendIt) {
  FailUntilOpen();
  EXPECT_FALSE(breaker_.OnFailure(false));
  clock_->Advance(1000ms);
  EXPECT_EQ(breaker_.Acquire(), Breaker::Permit::kProbe);
}

TEST_F(BreakerTest, GoneIsFinalAndReportedOnce) {
  EXPECT_TRUE(breaker_.MarkGone());
  EXPECT_FALSE(breaker_.MarkGone());
  EXPECT_EQ(breaker_.mode(), Breaker::Mode::kGone);
  EXPECT_EQ(breaker_.State().state, "gone");
  EXPECT_FALSE(breaker_.OnSuccess(1));
  EXPECT_FALSE(breaker_.OnFailure(true));
  clock_->Advance(1h);
  EXPECT_EQ(breaker_.Acquire(), Breaker::Permit::kDenied);
  EXPECT_FALSE(breaker_.IsClosed());
}

}  // namespace
}  // namespace outbox::agent
