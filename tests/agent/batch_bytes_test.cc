// batch.max_bytes bounds the batches a route forms (docs/design.md,
// "Batches"): rows larger than max_bytes / max_messages make more, smaller
// requests, never a request the endpoint refuses unsent, and never an
// endpoint failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "agent_fixture.h"

namespace outbox::agent::testing {
namespace {

TEST_F(AgentTest, BatchesAreBoundedByMaxBytesAndAllLargeRowsArrive) {
  constexpr int kRows = 100;
  constexpr std::size_t kMaxBytes = 200'000;
  std::mutex mutex;
  std::size_t largest = 0;  // guarded by mutex
  std::atomic<int> requests{0};
  server_.Post("/events", [&](const httplib::Request& req, httplib::Response& res) {
    ++requests;
    std::lock_guard lock(mutex);
    largest = std::max(largest, req.body.size());
    res.status = 200;
  });
  server_.Start();
  const std::string payload = R"({"pad":")" + std::string(11'000, 'x') + R"("})";
  app_->exec("BEGIN");
  for (int i = 0; i < kRows; ++i) producer_->Enqueue({"t", "k" + std::to_string(i), payload, "", {}});
  app_->exec("COMMIT");
  Options options = BaseOptions();
  TopicOptions topic = HttpTopic();
  topic.endpoint.batch.max_messages = 100;
  topic.endpoint.batch.max_bytes = kMaxBytes;
  topic.workers = 1;
  options.topics["t"] = topic;
  options.claim_batch = 100;
  Agent agent(options);
  agent.Start();
  bool breaker_opened = false;
  ASSERT_TRUE(WaitFor([&] {
    for (const BreakerState& b : agent.Snapshot().breakers) breaker_opened |= b.state != "closed";
    return CountStatus(store::Status::kDelivered) == kRows;
  }));
  agent.Stop();
  EXPECT_FALSE(breaker_opened);
  EXPECT_EQ(CountStatus(store::Status::kDead), 0);
  EXPECT_GE(requests.load(), 5);  // 18 rows of 11 KB fit in 200 000 bytes
  EXPECT_LT(requests.load(), kRows / 2);
  // NDJSON frames each member with its id, topic and key: well under 1 KB.
  EXPECT_LE(largest, kMaxBytes + kRows * 1024);
  EXPECT_EQ(agent.Snapshot().topics.at("t").attempt_failures, 0);
}

// A single row larger than max_bytes still goes, alone.
TEST_F(AgentTest, ARowLargerThanMaxBytesGoesAlone) {
  std::atomic<int> requests{0};
  server_.Post("/events", [&](const httplib::Request&, httplib::Response& res) {
    ++requests;
    res.status = 200;
  });
  server_.Start();
  const std::string payload = R"({"pad":")" + std::string(3'000, 'x') + R"("})";
  app_->exec("BEGIN");
  for (int i = 0; i < 3; ++i) producer_->Enqueue({"t", "k" + std::to_string(i), payload, "", {}});
  app_->exec("COMMIT");
  Options options = BaseOptions();
  TopicOptions topic = HttpTopic();
  topic.endpoint.batch.max_messages = 10;
  topic.endpoint.batch.max_bytes = 1000;
  topic.workers = 1;
  options.topics["t"] = topic;
  Agent agent(options);
  agent.Start();
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 3; }));
  agent.Stop();
  EXPECT_EQ(requests.load(), 3);
  EXPECT_EQ(CountStatus(store::Status::kDead), 0);
}

}  // namespace
}  // namespace outbox::agent::testing
