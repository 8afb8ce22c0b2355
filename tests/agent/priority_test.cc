// Topic priority: a backlog of a higher-priority topic is claimed before
// that of a lower-priority topic on the same endpoint.
#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "agent_fixture.h"

namespace outbox::agent::testing {
namespace {

class PriorityTest : public AgentTest {
 protected:
  // Inserts with plain SQL (no eager path: only the sweeper claims), the
  // payload naming the topic.
  void Backlog(const std::string& topic, int count) {
    for (int i = 0; i < count; ++i) {
      SQLite::Statement q(*app_, "INSERT INTO outbox(topic, msg_key, payload) VALUES(?, ?, ?)");
      q.bind(1, topic);
      q.bind(2, "k" + std::to_string(i));
      q.bind(3, "\"" + topic + "\"");
      q.exec();
    }
  }

  // The position of the first request whose body names `topic`.
  std::size_t FirstOf(const std::string& topic) const {
    const auto requests = server_.requests();
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (requests[i].body == "\"" + topic + "\"") return i;
    }
    return requests.size();
  }

  TopicOptions Topic(int priority) {
    TopicOptions topic = HttpTopic();
    topic.workers = 1;
    topic.queue_capacity = 4;
    topic.priority = priority;
    return topic;
  }
};

constexpr int kEach = 40;

TEST_F(PriorityTest, HigherPriorityBacklogGoesFirstOnASharedEndpoint) {
  server_.Post("/events",
               [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  server_.Start();
  // The low-priority topic sorts first by name and was committed first: only
  // its priority can put it last.
  Backlog("a.low", kEach);
  Backlog("b.high", kEach);
  Options options = BaseOptions();
  options.sweep_interval_ms = 20;
  options.topics["a.low"] = Topic(0);
  options.topics["b.high"] = Topic(5);
  Agent agent(options);
  agent.Start();
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 2 * kEach; }));
  agent.Stop();
  // Lower priority waits until the higher one has nothing left to claim; by
  // then at most its queue and worker still hold unsent high rows.
  EXPECT_GE(FirstOf("a.low"), static_cast<std::size_t>(kEach - 4 - 1));
  EXPECT_EQ(FirstOf("b.high"), 0u);
}

TEST_F(PriorityTest, EqualPrioritiesShareTheEndpoint) {
  server_.Post("/events",
               [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  server_.Start();
  Backlog("a.one", kEach);
  Backlog("b.two", kEach);
  Options options = BaseOptions();
  options.sweep_interval_ms = 20;
  options.topics["a.one"] = Topic(3);
  options.topics["b.two"] = Topic(3);
  Agent agent(options);
  agent.Start();
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 2 * kEach; }));
  agent.Stop();
  EXPECT_LT(FirstOf("b.two"), static_cast<std::size_t>(kEach / 2));
}

TEST_F(PriorityTest, PriorityOutOfRangeNamesTheTopic) {
  Options options = BaseOptions();
  options.topics["t"] = Topic(1001);
  try {
    Validate(options);
    FAIL() << "priority 1001 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "topics.\"t\".priority: expected an integer from -1000 to 1000, got 1001");
  }
}

}  // namespace
}  // namespace outbox::agent::testing
