// Attempt failures by kind of sink on /metrics.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "outbox/agent.h"
#include "prometheus.h"

namespace outbox::agent {
namespace {

bool HasLine(const std::string& text, const std::string& line) {
  std::istringstream lines(text);
  for (std::string l; std::getline(lines, l);) {
    if (l == line) return true;
  }
  return false;
}

TEST(SinkMetrics, AttemptFailuresCarryTheKindOfSink) {
  Metrics metrics;
  metrics.SetLabels({"orders", "telemetry"});
  metrics.AttemptFailed("orders", true, "nats");
  metrics.AttemptFailed("orders", false, "nats");
  metrics.AttemptFailed("telemetry", true, "mqtt");
  metrics.AttemptFailed("telemetry", true, "http");
  const MetricsSnapshot snapshot = metrics.Snapshot();
  EXPECT_EQ(snapshot.topics.at("orders").attempt_failures, 2);
  EXPECT_EQ(snapshot.topics.at("orders").attempt_failures_by_sink.at("nats"), 2);
  const std::string text = RenderPrometheus(snapshot, 0);
  EXPECT_TRUE(HasLine(text, R"(outbox_attempt_failures_total{topic="orders",sink="nats"} 2)"))
      << text;
  EXPECT_TRUE(HasLine(text, R"(outbox_attempt_failures_total{topic="telemetry",sink="mqtt"} 1)"));
  EXPECT_TRUE(HasLine(text, R"(outbox_attempt_failures_total{topic="telemetry",sink="http"} 1)"));
  // Every failure has its kind: no topic-only series beside them.
  EXPECT_EQ(text.find(R"(outbox_attempt_failures_total{topic="orders"})"), std::string::npos);
}

TEST(SinkMetrics, FailuresWithoutAKindKeepTheTopicOnlySeries) {
  Metrics metrics;
  metrics.SetLabels({"orders"});
  metrics.AttemptFailed("orders", true);
  metrics.AttemptFailed("orders", true, "http");
  const std::string text = RenderPrometheus(metrics.Snapshot(), 0);
  EXPECT_TRUE(HasLine(text, R"(outbox_attempt_failures_total{topic="orders",sink="http"} 1)"));
  EXPECT_TRUE(HasLine(text, R"(outbox_attempt_failures_total{topic="orders"} 1)"));
}

}  // namespace
}  // namespace outbox::agent
