// Sweeper failures are counted and, when they repeat, reported as trouble
// (what outboxd's /healthz answers) until a pass succeeds.
#include <gtest/gtest.h>

#include "agent_fixture.h"

namespace outbox::agent::testing {
namespace {

// The fault is real: another connection renames the outbox table away, so
// every statement of the sweeper fails with "no such table", and back.
TEST_F(AgentTest, RepeatedSweeperFailuresAreTroubleUntilAPassSucceeds) {
  Options options = BaseOptions();
  options.topics["t"] = HttpTopic();
  options.sweep_interval_ms = 5;  // a failed pass is retried after this
  options.metrics = std::make_shared<Metrics>();
  Agent agent(options);
  agent.Start();
  const std::shared_ptr<Metrics> metrics = options.metrics;
  EXPECT_FALSE(metrics->Trouble().has_value());

  app_->exec("ALTER TABLE outbox RENAME TO outbox_hidden");
  ASSERT_TRUE(WaitFor([&] { return metrics->Trouble().has_value(); }));
  const std::string trouble = *metrics->Trouble();
  EXPECT_NE(trouble.find("sweeper failing"), std::string::npos) << trouble;
  EXPECT_NE(trouble.find("no such table"), std::string::npos) << trouble;
  EXPECT_EQ(trouble.find('\n'), std::string::npos) << trouble;
  const MetricsSnapshot failing = metrics->Snapshot();
  EXPECT_GE(failing.sweeper_consecutive_failures, kSweeperFailuresForTrouble);
  EXPECT_GE(failing.sweeper_errors, kSweeperFailuresForTrouble);
  const std::string text = RenderPrometheus(failing);
  EXPECT_NE(text.find("outbox_sweeper_errors_total " + std::to_string(failing.sweeper_errors)),
            std::string::npos)
      << text;

  app_->exec("ALTER TABLE outbox_hidden RENAME TO outbox");
  ASSERT_TRUE(WaitFor([&] { return !metrics->Trouble().has_value(); }));
  const MetricsSnapshot healed = metrics->Snapshot();
  EXPECT_EQ(healed.sweeper_consecutive_failures, 0);
  EXPECT_GE(healed.sweeper_errors, failing.sweeper_errors);  // a total never goes back
  agent.Stop();
}

TEST(AgentMetrics, FewerFailuresThanTheThresholdAreNoTrouble) {
  Metrics metrics;
  for (int i = 1; i < kSweeperFailuresForTrouble; ++i) metrics.SweeperFailed("database is locked");
  EXPECT_FALSE(metrics.Trouble().has_value());
  metrics.SweeperSucceeded();
  for (int i = 1; i < kSweeperFailuresForTrouble; ++i) metrics.SweeperFailed("disk full");
  EXPECT_FALSE(metrics.Trouble().has_value());  // the success in between reset the run
  metrics.SweeperFailed("disk\nfull");
  ASSERT_TRUE(metrics.Trouble().has_value());
  EXPECT_EQ(*metrics.Trouble(),
            "sweeper failing: " + std::to_string(kSweeperFailuresForTrouble) +
                " consecutive passes failed, last: disk full");
  EXPECT_EQ(metrics.Snapshot().sweeper_errors, 2 * kSweeperFailuresForTrouble - 1);
}

}  // namespace
}  // namespace outbox::agent::testing
