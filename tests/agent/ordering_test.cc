// Per-key ordering end to end (docs/ordering.md): a real HTTP receiver
// records the order in which each key's messages first arrive.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "agent_fixture.h"

namespace outbox::agent::testing {
namespace {

// Payloads are "<ordering key>#<sequence number within the key>".
std::string Payload(const std::string& key, int seq) { return key + "#" + std::to_string(seq); }

// Records, per ordering key, the sequence numbers in order of first arrival,
// and every arrival that came before an earlier message's first arrival.
class ArrivalLog {
 public:
  void Record(const std::string& body) {
    const auto hash = body.rfind('#');
    if (hash == std::string::npos) return;
    const std::string key = body.substr(0, hash);
    const int seq = std::stoi(body.substr(hash + 1));
    std::lock_guard lock(mutex_);
    ++arrivals_;
    auto& seen = first_[key];
    if (std::find(seen.begin(), seen.end(), seq) != seen.end()) return;  // a resend
    if (seq != static_cast<int>(seen.size())) {
      ++out_of_order_;
      if (example_.empty()) {
        example_ = key + ": #" + std::to_string(seq) + " after " + std::to_string(seen.size()) +
                   " first arrivals";
      }
    }
    seen.push_back(seq);
  }
  std::size_t FirstArrivals() {
    std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (const auto& [key, seen] : first_) n += seen.size();
    return n;
  }
  std::vector<int> Of(const std::string& key) {
    std::lock_guard lock(mutex_);
    return first_[key];
  }
  int out_of_order() {
    std::lock_guard lock(mutex_);
    return out_of_order_;
  }
  std::string example() {
    std::lock_guard lock(mutex_);
    return example_;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::vector<int>> first_;  // guarded by mutex_
  int out_of_order_ = 0;                           // guarded by mutex_
  int arrivals_ = 0;                               // guarded by mutex_
  std::string example_;                            // guarded by mutex_
};

class OrderingAgentTest : public AgentTest {
 protected:
  TopicOptions OrderedTopic(store::DeadHead dead_head = store::DeadHead::kBlock) {
    TopicOptions topic = HttpTopic();
    topic.ordering = {true, dead_head};
    topic.retry.first_interval_ms = 5;
    topic.retry.max_interval_ms = 20;
    topic.retry.max_attempts = 1000;
    topic.breaker.failure_threshold = 1'000'000;  // failures here are the message's, not an outage
    return topic;
  }

  // For two agents sharing the file: topic "t" ordered, fast sweeps.
  Options TwoAgentOptions(int workers) {
    Options options = BaseOptions();
    options.sweep_interval_ms = 20;
    TopicOptions topic = OrderedTopic();
    topic.workers = workers;
    options.topics["t"] = topic;
    return options;
  }

  // Waits (up to 120 s) for the first arrival of `messages` messages, then
  // checks that no key's messages arrived out of commit order.
  void ExpectAllArrivedInOrder(std::size_t messages) {
    ASSERT_TRUE(WaitFor([&] { return log_.FirstArrivals() == messages; },
                        std::chrono::seconds(120)))
        << log_.FirstArrivals();
    EXPECT_EQ(log_.out_of_order(), 0) << log_.example();
  }

  static store::NewMessage Message(const std::string& key, int seq) {
    store::NewMessage message;
    message.topic = "t";
    message.key = Payload(key, seq);
    message.payload = Payload(key, seq);
    message.ordering_key = key;
    return message;
  }

  std::int64_t Enqueue(Agent* agent, const std::string& key, int seq,
                       std::optional<std::int64_t> deliver_at = std::nullopt) {
    Transaction txn(agent, *producer_);
    store::NewMessage message = Message(key, seq);
    message.deliver_at = deliver_at;
    const auto id = txn.Enqueue(message).id;
    txn.Commit();
    return id;
  }

  // Answers `status` for each payload in `refuse` (once each), 200 otherwise.
  void Serve(std::function<int(const std::string&)> answer = {}) {
    server_.Post("/events", [this, answer](const httplib::Request& req, httplib::Response& res) {
      const int status = answer ? answer(req.body) : 200;
      if (status == 200) log_.Record(req.body);
      res.status = status;
    });
    server_.Start();
  }

  ArrivalLog log_;
};

TEST_F(OrderingAgentTest, EachKeyArrivesInCommitOrderWithTwoAgentsAndEightWorkers) {
  Serve();
  const Options options = TwoAgentOptions(8);
  Agent a(options);
  Agent b(options);
  a.Start();
  b.Start();
  constexpr int kKeys = 1000;
  constexpr int kPerKey = 4;
  // In transactions of 100 messages (one commit each), alternately handed
  // to either agent's eager path.
  for (int seq = 0; seq < kPerKey; ++seq) {
    for (int first = 0; first < kKeys; first += 100) {
      Transaction txn(first % 200 == 0 ? &a : &b, *producer_);
      for (int k = first; k < first + 100; ++k) txn.Enqueue(Message("k" + std::to_string(k), seq));
      txn.Commit();
    }
  }
  ExpectAllArrivedInOrder(kKeys * kPerKey);
  a.Stop();
  b.Stop();
}

TEST_F(OrderingAgentTest, EachKeyArrivesInCommitOrderDespiteRandomFailuresAnd429s) {
  std::mutex random_mutex;
  std::mt19937 random(16);
  Serve([&](const std::string&) {
    std::lock_guard lock(random_mutex);
    const int roll = static_cast<int>(random() % 100);
    if (roll < 30) return 503;
    if (roll < 40) return 429;
    return 200;
  });
  Options options = BaseOptions();
  options.sweep_interval_ms = 10;
  TopicOptions topic = OrderedTopic();
  topic.workers = 8;
  options.topics["t"] = topic;
  Agent agent(options);
  agent.Start();
  constexpr int kKeys = 100;
  constexpr int kPerKey = 5;
  for (int seq = 0; seq < kPerKey; ++seq) {
    Transaction txn(&agent, *producer_);
    for (int k = 0; k < kKeys; ++k) txn.Enqueue(Message("k" + std::to_string(k), seq));
    txn.Commit();
  }
  ExpectAllArrivedInOrder(kKeys * kPerKey);
  agent.Stop();
}

// Hot keys go in runs (a worker sends many rows of one key in a row while
// the next ones are claimed); two agents share the file and a receiver
// refuses some requests at random, ending runs in the middle.
TEST_F(OrderingAgentTest, HotKeysSentInRunsKeepTheirOrderWithTwoAgentsAndFailures) {
  std::mutex random_mutex;
  std::mt19937 random(8);
  Serve([&](const std::string&) {
    std::lock_guard lock(random_mutex);
    return random() % 100 < 5 ? 503 : 200;
  });
  const Options options = TwoAgentOptions(2);
  Agent a(options);
  Agent b(options);
  a.Start();
  b.Start();
  constexpr int kKeys = 3;
  constexpr int kPerKey = 400;
  for (int first = 0; first < kPerKey; first += 50) {
    Transaction txn(first % 100 == 0 ? &a : &b, *producer_);
    for (int seq = first; seq < first + 50; ++seq) {
      for (int k = 0; k < kKeys; ++k) txn.Enqueue(Message("hot" + std::to_string(k), seq));
    }
    txn.Commit();
  }
  ExpectAllArrivedInOrder(kKeys * kPerKey);
  a.Stop();
  b.Stop();
}

TEST_F(OrderingAgentTest, ACompletionSendsItsSuccessorWithoutASweep) {
  Serve();
  Options options = BaseOptions();  // sweeps once an hour: only the eager paths send
  options.topics["t"] = OrderedTopic();
  Agent agent(options);
  agent.Start();
  Transaction txn(&agent, *producer_);
  for (int seq = 0; seq < 50; ++seq) txn.Enqueue(Message("hot", seq));
  txn.Commit();  // the eager path claims the first; each completion the next
  ASSERT_TRUE(WaitFor([&] { return log_.FirstArrivals() == 50; })) << log_.FirstArrivals();
  EXPECT_EQ(log_.out_of_order(), 0) << log_.example();
  agent.Stop();
}

TEST_F(OrderingAgentTest, DeadHeadBlocksItsKeyUntilAnOperatorRetriesIt) {
  std::atomic<bool> poison{true};
  Serve([&](const std::string& body) { return body == "a#0" && poison.load() ? 422 : 200; });
  Options options = BaseOptions();
  options.sweep_interval_ms = 10;
  options.topics["t"] = OrderedTopic(store::DeadHead::kBlock);
  Agent agent(options);
  agent.Start();
  const auto head = Enqueue(&agent, "a", 0);
  const auto waiting = Enqueue(&agent, "a", 1);
  Enqueue(&agent, "a", 2);
  Enqueue(&agent, "b", 0);
  Enqueue(&agent, "b", 1);
  ASSERT_TRUE(WaitFor([&] { return log_.Of("b").size() == 2 && Row(head).status == store::Status::kDead; }));
  EXPECT_TRUE(log_.Of("a").empty());
  EXPECT_EQ(Row(waiting).status, store::Status::kPending);
  EXPECT_EQ(agent.Snapshot().blocked_keys, 1);

  poison = false;
  {
    store::Options admin;
    admin.path = db_path_;
    store::Store s(admin);
    store::RowSelector which;
    which.id = head;
    ASSERT_EQ(store::Operator(s).Retry(which, {"test", "host"}, clock_->WallMs()), 1);
  }
  agent.NotifyExternalCommit();
  ASSERT_TRUE(WaitFor([&] { return log_.Of("a").size() == 3; }));
  EXPECT_EQ(log_.Of("a"), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(agent.Snapshot().blocked_keys, 0);
  agent.Stop();
}

TEST_F(OrderingAgentTest, DeadHeadWithSkipLetsTheKeyGoOn) {
  Serve([&](const std::string& body) { return body == "a#0" ? 422 : 200; });
  Options options = BaseOptions();
  options.sweep_interval_ms = 10;
  options.topics["t"] = OrderedTopic(store::DeadHead::kSkip);
  Agent agent(options);
  agent.Start();
  const auto head = Enqueue(&agent, "a", 0);
  Enqueue(&agent, "a", 1);
  Enqueue(&agent, "a", 2);
  ASSERT_TRUE(WaitFor([&] { return log_.Of("a").size() == 2; }));
  EXPECT_EQ(log_.Of("a"), (std::vector<int>{1, 2}));
  EXPECT_EQ(Row(head).status, store::Status::kDead);
  EXPECT_EQ(agent.Snapshot().blocked_keys, 0);
  agent.Stop();
}

TEST_F(OrderingAgentTest, AHeadWithAFutureDeliverAtHoldsItsKey) {
  Serve();
  Options options = BaseOptions();
  options.sweep_interval_ms = 10;
  TopicOptions topic = OrderedTopic();
  // The sweeper makes rows due that lie further ahead than any retry delay
  // (a wall clock that jumped back): keep the schedule within it.
  topic.retry.max_interval_ms = 3'600'000;
  options.topics["t"] = topic;
  Agent agent(options);
  agent.Start();
  const auto head = Enqueue(&agent, "a", 0, clock_->WallMs() + 60'000);
  const auto second = Enqueue(&agent, "a", 1);
  Enqueue(&agent, "b", 0);
  ASSERT_TRUE(WaitFor([&] { return log_.Of("b").size() == 1; }));
  EXPECT_TRUE(log_.Of("a").empty());
  EXPECT_EQ(Row(second).status, store::Status::kPending);
  EXPECT_EQ(Row(head).status, store::Status::kPending);
  clock_->Advance(std::chrono::seconds(61));
  agent.NotifyExternalCommit();
  ASSERT_TRUE(WaitFor([&] { return log_.Of("a").size() == 2; }));
  EXPECT_EQ(log_.Of("a"), (std::vector<int>{0, 1}));
  agent.Stop();
}

TEST_F(OrderingAgentTest, AnAgentWhoseOrderingDisagreesWithTheDatabaseRefusesToStart) {
  Serve();
  Options ordered = BaseOptions();
  ordered.topics["t"] = OrderedTopic(store::DeadHead::kBlock);
  Agent first(ordered);
  first.Start();
  first.Stop();

  for (const auto& other : {TopicOptions(HttpTopic()), OrderedTopic(store::DeadHead::kSkip)}) {
    Options options = BaseOptions();
    options.topics["t"] = other;
    Agent second(options);
    try {
      second.Start();
      FAIL() << "started against the recorded ordering";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(R"(topics."t".ordering: the database records ordering by key, dead_head block)"),
                std::string::npos)
          << e.what();
    }
    EXPECT_FALSE(second.Running());
  }
  Agent again(ordered);
  again.Start();
  EXPECT_TRUE(again.Running());
  again.Stop();
}

TEST(OrderingConfigTest, ReadsTheOrderingOfATopic) {
  const Config config = ParseConfig(R"({"topics": {"t": {"url": "http://127.0.0.1:1/",
      "ordering": {"by": "key", "dead_head": "skip"}}, "u": {"url": "http://127.0.0.1:1/"}}})");
  EXPECT_EQ(config.options.topics.at("t").ordering,
            (store::TopicOrdering{true, store::DeadHead::kSkip}));
  EXPECT_FALSE(config.options.topics.at("u").ordering.by_key);
}

TEST(OrderingConfigTest, RefusesAnOrderingItCannotHonour) {
  const auto error = [](const std::string& json) {
    try {
      ParseConfig(json);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error(R"({"topics": {"t": {"url": "http://h/", "ordering": {}}}})"),
            R"(topics."t".ordering.by: required key is missing (the only mode is "key"))");
  EXPECT_EQ(error(R"({"topics": {"t": {"url": "http://h/", "ordering": {"by": "topic"}}}})"),
            R"(topics."t".ordering.by: expected one of "key", got "topic")");
  EXPECT_EQ(
      error(R"({"topics": {"t": {"url": "http://h/", "ordering": {"by": "key", "dead_head": "drop"}}}})"),
      R"(topics."t".ordering.dead_head: expected one of "block", "skip", got "drop")");
  EXPECT_EQ(error(R"({"topics": {"*": {"url": "http://h/", "ordering": {"by": "key"}}}})"),
            R"(topics."*".ordering: not available on "*"; give the ordered topic its own entry)");
}

}  // namespace
}  // namespace outbox::agent::testing
