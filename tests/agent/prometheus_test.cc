#include "prometheus.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "outbox/agent.h"

namespace outbox::agent {
namespace {

constexpr std::int64_t kNowMs = 1'700'000'000'000;
constexpr char kWeirdTopic[] = "we\"ird\\topic\nx";

store::TopicStatusCount Count(const std::string& topic, store::Status status, std::int64_t count,
                              std::int64_t age_ms = 0) {
  store::TopicStatusCount c;
  c.topic = topic;
  c.status = status;
  c.count = count;
  c.oldest_created_at = kNowMs - age_ms;
  if (status == store::Status::kPending && count > 0) c.oldest_due_at = kNowMs - age_ms;
  return c;
}

TopicCounters Counters(std::int64_t base) {
  TopicCounters c;
  c.enqueued = base + 1;
  c.delivered = base + 2;
  c.attempt_failures = base + 3;
  c.dead = base + 4;
  c.recycled = base + 5;
  c.pool_rejections = base + 6;
  c.attempts_saved = base + 7;
  c.crash_budget_deaths = base + 8;
  c.latency_buckets = {0, 0, 0};
  return c;
}

// Two configured topics (one with characters the format must escape) and
// "other"; the database also holds rows of two unconfigured topics.
MetricsSnapshot Sample() {
  MetricsSnapshot s;
  s.latency_bounds_seconds = {0.1, 1, 2.5};
  s.topics["order.created"] = Counters(0);
  s.topics["order.created"].latency_buckets = {2, 0, 3};
  s.topics["order.created"].latency_count = 6;  // one above the last bound
  s.topics["order.created"].latency_sum_seconds = 30.5;
  s.topics[kWeirdTopic] = Counters(10);
  s.topics["other"] = Counters(20);
  s.db.counts = {
      Count("order.created", store::Status::kPending, 3, 5'000),
      Count("order.created", store::Status::kDelivered, 9, 60'000),
      Count("order.created", store::Status::kDead, 2, 1'000),
      Count("order.created", store::Status::kInFlight, 1, 100),
      Count("stray.a", store::Status::kPending, 4, 10'000),
      Count("stray.b", store::Status::kPending, 1, 20'000),
      Count("stray.b", store::Status::kDead, 1, 30'000),
  };
  s.db.undelivered = 50;
  s.db.db_bytes = 4096;
  s.db.wal_bytes = 8192;
  s.db.limits.max_pending = 100;
  s.db.limits.max_db_bytes = 0;  // off
  s.breakers = {{"https://h.example/orders", "open", 3}, {"http://127.0.0.1:1/\"q\"", "closed", 0}};
  s.taken_back_leases = 2;
  s.unrouted_pending = 7;
  return s;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool HasLine(const std::string& text, const std::string& line) {
  for (const std::string& l : Lines(text)) {
    if (l == line) return true;
  }
  return false;
}

TEST(RenderPrometheus, CountersCarryATopicLabel) {
  const std::string text = RenderPrometheus(Sample(), kNowMs);
  EXPECT_TRUE(HasLine(text, "# TYPE outbox_enqueued_total counter")) << text;
  EXPECT_TRUE(HasLine(text, R"(outbox_enqueued_total{topic="order.created"} 1)"));
  EXPECT_TRUE(HasLine(text, R"(outbox_delivered_total{topic="order.created"} 2)"));
  EXPECT_TRUE(HasLine(text, R"(outbox_attempt_failures_total{topic="order.created"} 3)"));
  EXPECT_TRUE(HasLine(text, R"(outbox_dead_total{topic="order.created"} 4)"));
  EXPECT_TRUE(HasLine(text, R"(outbox_recycled_total{topic="order.created"} 5)"));
  EXPECT_TRUE(HasLine(text, R"(outbox_pool_rejections_total{topic="order.created"} 6)"));
  EXPECT_TRUE(HasLine(text, R"(outbox_attempts_saved_total{topic="order.created"} 7)"));
  EXPECT_TRUE(HasLine(text, R"(outbox_crash_budget_deaths_total{topic="order.created"} 8)"));
  EXPECT_TRUE(HasLine(text, R"(outbox_enqueued_total{topic="other"} 21)"));
  EXPECT_TRUE(HasLine(text, "outbox_taken_back_total 2"));
}

TEST(RenderPrometheus, EscapesLabelValues) {
  const std::string text = RenderPrometheus(Sample(), kNowMs);
  EXPECT_TRUE(HasLine(text, R"(outbox_enqueued_total{topic="we\"ird\\topic\nx"} 11)")) << text;
  EXPECT_TRUE(HasLine(text, R"(outbox_breaker_state{endpoint="http://127.0.0.1:1/\"q\""} 0)"));
  // No raw line break inside a sample: every line is a comment or a sample.
  for (const std::string& line : Lines(text)) {
    EXPECT_TRUE(line.starts_with("# ") || line.starts_with("outbox_")) << line;
  }
}

TEST(RenderPrometheus, DatabaseGaugesCountUnconfiguredTopicsAsOther) {
  const std::string text = RenderPrometheus(Sample(), kNowMs);
  EXPECT_TRUE(HasLine(text, R"(outbox_pending{topic="order.created"} 3)")) << text;
  EXPECT_TRUE(HasLine(text, R"(outbox_in_flight{topic="order.created"} 1)"));
  EXPECT_TRUE(HasLine(text, R"(outbox_dead{topic="order.created"} 2)"));
  EXPECT_TRUE(HasLine(text, R"(outbox_oldest_pending_age_seconds{topic="order.created"} 5)"));
  EXPECT_TRUE(HasLine(text, R"(outbox_pending{topic="other"} 5)"));
  EXPECT_TRUE(HasLine(text, R"(outbox_dead{topic="other"} 1)"));
  EXPECT_TRUE(HasLine(text, R"(outbox_oldest_pending_age_seconds{topic="other"} 20)"));
  // A configured topic without rows still has its series.
  EXPECT_TRUE(HasLine(text, R"(outbox_pending{topic="we\"ird\\topic\nx"} 0)"));
  EXPECT_TRUE(HasLine(text, R"(outbox_oldest_pending_age_seconds{topic="we\"ird\\topic\nx"} 0)"));
  EXPECT_EQ(text.find("stray"), std::string::npos);
}

TEST(RenderPrometheus, HistogramBucketsAreCumulativeUpToInf) {
  const std::string text = RenderPrometheus(Sample(), kNowMs);
  EXPECT_TRUE(HasLine(text, "# TYPE outbox_delivery_latency_seconds histogram")) << text;
  const std::string prefix = R"(outbox_delivery_latency_seconds_bucket{topic="order.created",le=)";
  EXPECT_TRUE(HasLine(text, prefix + R"("0.1"} 2)"));
  EXPECT_TRUE(HasLine(text, prefix + R"("1"} 2)"));
  EXPECT_TRUE(HasLine(text, prefix + R"("2.5"} 5)"));
  EXPECT_TRUE(HasLine(text, prefix + R"("+Inf"} 6)"));
  EXPECT_TRUE(HasLine(text, R"(outbox_delivery_latency_seconds_sum{topic="order.created"} 30.5)"));
  EXPECT_TRUE(HasLine(text, R"(outbox_delivery_latency_seconds_count{topic="order.created"} 6)"));
  EXPECT_TRUE(
      HasLine(text, R"(outbox_delivery_latency_seconds_bucket{topic="other",le="+Inf"} 0)"));
}

TEST(RenderPrometheus, DatabaseSizeLimitsAndBreakers) {
  const std::string text = RenderPrometheus(Sample(), kNowMs);
  EXPECT_TRUE(HasLine(text, "outbox_db_bytes 4096")) << text;
  EXPECT_TRUE(HasLine(text, "outbox_wal_bytes 8192"));
  EXPECT_TRUE(HasLine(text, "outbox_unrouted_pending 7"));
  EXPECT_TRUE(HasLine(text, R"(outbox_limit_ratio{limit="max_pending"} 0.5)"));
  // max_db_bytes is off: no ratio to report.
  EXPECT_EQ(text.find(R"(limit="max_db_bytes")"), std::string::npos);
  EXPECT_TRUE(HasLine(text, R"(outbox_breaker_state{endpoint="https://h.example/orders"} 2)"));
  EXPECT_TRUE(HasLine(
      text, R"(outbox_breaker_consecutive_failures{endpoint="https://h.example/orders"} 3)"));
}

// Every sample belongs to a family announced before it by exactly one HELP
// and one TYPE line, as the exposition format requires.
TEST(RenderPrometheus, EveryFamilyHasOneHelpAndTypeBeforeItsSamples) {
  const std::string text = RenderPrometheus(Sample(), kNowMs);
  std::map<std::string, std::string> types;
  std::set<std::string> helps;
  std::set<std::string> finished;  // families whose samples ended
  std::string current;
  for (const std::string& line : Lines(text)) {
    if (line.starts_with("# HELP ")) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(helps.insert(name).second) << "second HELP for " << name;
      continue;
    }
    if (line.starts_with("# TYPE ")) {
      std::istringstream in(line.substr(7));
      std::string name, type;
      in >> name >> type;
      EXPECT_TRUE(types.emplace(name, type).second) << "second TYPE for " << name;
      EXPECT_TRUE(helps.contains(name)) << "TYPE before HELP for " << name;
      if (!current.empty()) finished.insert(current);
      current = name;
      continue;
    }
    std::string name = line.substr(0, line.find_first_of("{ "));
    if (types[current] == "histogram") {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        if (name == current + suffix) name = current;
      }
    }
    EXPECT_EQ(name, current) << line;
    EXPECT_FALSE(finished.contains(name)) << "samples of " << name << " are split: " << line;
  }
  EXPECT_GE(types.size(), 20u);
}

TEST(RenderPrometheus, EmptySnapshotIsValid) {
  const std::string text = RenderPrometheus(MetricsSnapshot{}, kNowMs);
  EXPECT_TRUE(HasLine(text, "outbox_db_bytes 0")) << text;
  EXPECT_TRUE(HasLine(text, "# TYPE outbox_pending gauge"));
  EXPECT_EQ(text.back(), '\n');
}

constexpr std::int64_t kCreatedMs = 1'699'999'000'500;

TEST(RenderOpenMetrics, CountersDropTotalFromTheFamilyAndCarryCreated) {
  const std::string text = RenderOpenMetrics(Sample(), kNowMs, kCreatedMs);
  EXPECT_TRUE(HasLine(text, "# TYPE outbox_enqueued counter")) << text;
  EXPECT_FALSE(HasLine(text, "# TYPE outbox_enqueued_total counter"));
  EXPECT_TRUE(HasLine(text, R"(outbox_enqueued_total{topic="order.created"} 1)"));
  EXPECT_TRUE(HasLine(text, R"(outbox_enqueued_created{topic="order.created"} 1699999000.5)"));
  EXPECT_TRUE(HasLine(text, "# TYPE outbox_taken_back counter"));
  EXPECT_TRUE(HasLine(text, "outbox_taken_back_total 2"));
  EXPECT_TRUE(HasLine(text, "outbox_taken_back_created 1699999000.5"));
}

// A counter family "outbox_dead" would clash with the gauge outbox_dead; the
// sample keeps its name (what queries and alerts use) as an unknown family.
TEST(RenderOpenMetrics, TheDeadCounterIsUnknownBesideTheDeadGauge) {
  const std::string text = RenderOpenMetrics(Sample(), kNowMs, kCreatedMs);
  EXPECT_TRUE(HasLine(text, "# TYPE outbox_dead_total unknown")) << text;
  EXPECT_TRUE(HasLine(text, R"(outbox_dead_total{topic="order.created"} 4)"));
  EXPECT_TRUE(HasLine(text, "# TYPE outbox_dead gauge"));
  EXPECT_EQ(text.find("outbox_dead_created"), std::string::npos);
}

TEST(RenderOpenMetrics, HistogramUnitsCreatedAndEof) {
  const std::string text = RenderOpenMetrics(Sample(), kNowMs, kCreatedMs);
  EXPECT_TRUE(HasLine(text, "# UNIT outbox_delivery_latency_seconds seconds")) << text;
  EXPECT_TRUE(HasLine(
      text, R"(outbox_delivery_latency_seconds_created{topic="order.created"} 1699999000.5)"));
  EXPECT_TRUE(HasLine(text, "# UNIT outbox_db_bytes bytes"));
  EXPECT_TRUE(HasLine(text, "# UNIT outbox_oldest_pending_age_seconds seconds"));
  EXPECT_TRUE(text.ends_with("\n# EOF\n")) << text;
  EXPECT_EQ(text.find("\n\n"), std::string::npos);
}

TEST(RenderOpenMetrics, EmptySnapshotEndsWithEof) {
  const std::string text = RenderOpenMetrics(MetricsSnapshot{}, kNowMs, kCreatedMs);
  EXPECT_TRUE(HasLine(text, "outbox_db_bytes 0")) << text;
  EXPECT_TRUE(text.ends_with("# EOF\n"));
}

// The Prometheus text has none of OpenMetrics' additions.
TEST(RenderPrometheus, HasNoOpenMetricsLines) {
  const std::string text = RenderPrometheus(Sample(), kNowMs);
  EXPECT_EQ(text.find("_created"), std::string::npos);
  EXPECT_EQ(text.find("# UNIT"), std::string::npos);
  EXPECT_EQ(text.find("# EOF"), std::string::npos);
  EXPECT_TRUE(HasLine(text, "# TYPE outbox_enqueued_total counter"));
}

TEST(NegotiateMetricsFormat, OpenMetricsOnlyWhenAskedForAtLeastAsMuchAsText) {
  using enum MetricsFormat;
  // What Prometheus 2.42 sends.
  EXPECT_EQ(NegotiateMetricsFormat(
                "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
            kOpenMetrics);
  EXPECT_EQ(NegotiateMetricsFormat("application/openmetrics-text"), kOpenMetrics);
  EXPECT_EQ(NegotiateMetricsFormat("Application/OpenMetrics-Text; Version=\"1.0.0\""),
            kOpenMetrics);
  EXPECT_EQ(NegotiateMetricsFormat(""), kPrometheusText);
  EXPECT_EQ(NegotiateMetricsFormat("*/*"), kPrometheusText);
  EXPECT_EQ(NegotiateMetricsFormat("text/plain; version=0.0.4"), kPrometheusText);
  EXPECT_EQ(NegotiateMetricsFormat("application/openmetrics-text; version=0.0.1"),
            kPrometheusText);
  EXPECT_EQ(NegotiateMetricsFormat("application/openmetrics-text;q=0"), kPrometheusText);
  EXPECT_EQ(NegotiateMetricsFormat("application/openmetrics-text;q=oops"), kPrometheusText);
  EXPECT_EQ(NegotiateMetricsFormat("text/plain;q=0.9, application/openmetrics-text;q=0.5"),
            kPrometheusText);
  EXPECT_EQ(NegotiateMetricsFormat("text/plain;q=0.5, application/openmetrics-text;q=0.9"),
            kOpenMetrics);
  EXPECT_EQ(MetricsContentType(kOpenMetrics),
            "application/openmetrics-text; version=1.0.0; charset=utf-8");
  EXPECT_EQ(MetricsContentType(kPrometheusText), "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace
}  // namespace outbox::agent
