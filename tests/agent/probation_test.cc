// Probation (agent/src/probation.h): a quarantined row of a topic without a
// route holds nothing up (issue #27, finding 7), and a quarantined row goes
// alone even when rows were claimed on the writer just before probation
// began (issue #28, defect 8).
#include "probation.h"

#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>

#include <future>

#include "agent_fixture.h"

namespace outbox::agent {
namespace {

using namespace std::chrono_literals;

class NoopHandler final : public Handler {
 public:
  HandlerResult Handle(const Delivery&) override { return {}; }
};

// A real writer and route "a" whose one worker holds what it takes, so that
// what was dispatched stays counted in Runtime::sending.
class ProbationTest : public ::testing::Test {
 protected:
  ProbationTest()
      : routes_(SystemClock()), dispatcher_(rt_, routes_), probation_(rt_, routes_, dispatcher_) {
    rt_.clock = SystemClock();
    rt_.log = std::make_shared<spdlog::logger>("test",
                                               std::make_shared<spdlog::sinks::null_sink_mt>());
    rt_.metrics = std::make_shared<Metrics>();
    rt_.owner = "test-owner";
    rt_.store_options.path = dir_.File("app.db");
    rt_.store_options.create = true;
    rt_.writer = std::make_unique<Writer>(rt_.store_options, rt_.log);
    routes_.Build({}, {{"a", std::make_shared<NoopHandler>()}});
    routes_.For("a")->pool = std::make_unique<WorkerPool>(
        "a", 1, WorkerPool::Capacity{4}, 1,
        [this](int, std::vector<store::Claimed>&, bool) { held_.get_future().wait(); }, nullptr);
  }
  ~ProbationTest() override {
    held_.set_value();
    routes_.For("a")->pool->StopIntake();
    routes_.For("a")->pool->Join();
  }

  // A pending row of topic "a"; `ordering_key` set: the topic orders by key.
  std::int64_t Enqueue(const std::string& key, const std::string& ordering_key = "") {
    std::int64_t id = 0;
    rt_.writer->Run([&](store::Store& s) {
      store::NewMessage message{"a", key, "{}", "", {}};
      if (!ordering_key.empty()) {
        s.AgreeOrdering("a", {true, store::DeadHead::kBlock}, rt_.clock->WallMs());
        message.ordering_key = ordering_key;
      }
      id = store::Producer(s.connection()).Enqueue(message).id;
    });
    return id;
  }
  // As a take-back from a crashed agent leaves it.
  void Quarantine(std::int64_t id) {
    rt_.writer->Run([&](store::Store& s) {
      SQLite::Statement q(s.connection(), "UPDATE outbox SET quarantined = 1 WHERE id = ?");
      q.bind(1, id);
      q.exec();
    });
  }
  store::Status StatusOf(std::int64_t id) {
    store::Options read = rt_.store_options;
    read.create = false;
    return store::Store(read).Get(id)->status;
  }
  // Holds the writer inside a transaction until `gate` is set; `inside` is
  // set once it got there.
  void HoldWriter(std::shared_future<void> gate, std::promise<void>& inside) {
    Writer::Task task;
    task.apply = [gate, &inside](store::Store&) {
      inside.set_value();
      gate.wait();
    };
    rt_.writer->Submit(std::move(task));
  }
  // Runs a probation step on a thread of its own; returns once its claim
  // waits in the writer's queue behind `queued_before` other tasks.
  std::jthread StepWhenQueued(std::size_t queued_before) {
    std::jthread step([this] { probation_.Step({{"a", 1}}, rt_.clock->WallMs()); });
    EXPECT_TRUE(outbox::testing::WaitFor([&] { return rt_.writer->queued() == queued_before + 1; },
                                         10s));
    return step;
  }

  outbox::testing::TempDir dir_;
  Runtime rt_;
  RouteTable routes_;
  Dispatcher dispatcher_;
  Probation probation_;
  std::promise<void> held_;
};

// Defect 8: the next row of an ordering key is claimed in a writer
// transaction that has not committed when probation begins; the step used
// to read `sending == 0` then and claim a quarantined row too, so two rows
// were in flight and a crash could not be blamed on either.
TEST_F(ProbationTest, ASuccessorClaimedBeforeProbationKeepsTheQuarantinedRowWaiting) {
  const std::int64_t next = Enqueue("m1", "k");
  const std::int64_t quarantined = Enqueue("q1");
  Quarantine(quarantined);
  std::promise<void> first_inside;
  std::promise<void> first_gate;
  HoldWriter(first_gate.get_future().share(), first_inside);
  first_inside.get_future().wait();
  // The next group: the claim of key k's next row, then a hold inside the
  // same transaction (after the claim, before the commit and hand-over).
  Writer::Task next_of_key;
  next_of_key.claim_next = NextOfKey{&dispatcher_, "a", "k"};
  rt_.writer->Submit(std::move(next_of_key));
  std::promise<void> second_inside;
  std::promise<void> second_gate;
  HoldWriter(second_gate.get_future().share(), second_inside);
  first_gate.set_value();
  second_inside.get_future().wait();
  ASSERT_EQ(rt_.sending.load(), 0);  // claimed, not handed over
  std::jthread step = StepWhenQueued(0);
  second_gate.set_value();
  step.join();
  EXPECT_TRUE(rt_.probation.load());
  EXPECT_EQ(StatusOf(next), store::Status::kInFlight);
  EXPECT_EQ(StatusOf(quarantined), store::Status::kPending);
  EXPECT_EQ(rt_.sending.load(), 1);
}

// The eager path's claim, submitted before probation began and applied
// after, takes nothing: the quarantined row goes alone.
TEST_F(ProbationTest, AnEagerClaimQueuedBeforeProbationTakesNothing) {
  const std::int64_t eager = Enqueue("e1");
  const std::int64_t quarantined = Enqueue("q1");
  Quarantine(quarantined);
  std::promise<void> inside;
  std::promise<void> gate;
  HoldWriter(gate.get_future().share(), inside);
  inside.get_future().wait();
  dispatcher_.ClaimCommitted({{eager, "a"}});
  std::jthread step = StepWhenQueued(1);
  gate.set_value();
  step.join();
  EXPECT_EQ(StatusOf(eager), store::Status::kPending);
  EXPECT_EQ(StatusOf(quarantined), store::Status::kInFlight);
  EXPECT_EQ(rt_.sending.load(), 1);
}

TEST_F(ProbationTest, TopicsWithoutARouteOrWithAnOpenBreakerHoldNothingUp) {
  EXPECT_FALSE(probation_.Step({{"gone", 3}}, rt_.clock->WallMs()));
  EXPECT_FALSE(rt_.probation.load());
  EXPECT_EQ(rt_.quarantined_unrouted.load(), 3);
  Breaker& breaker = *routes_.For("a")->breaker;
  breaker.OnFailure(/*open_now=*/true);
  EXPECT_FALSE(probation_.Step({{"a", 1}, {"gone", 3}}, rt_.clock->WallMs()));
  EXPECT_FALSE(rt_.probation.load());
}

// Finding 7: a row in flight when an agent crashed, of a topic the next
// configuration no longer routes, kept every other topic pending.
class HostileQuarantineTest : public testing::AgentTest {};

TEST_F(HostileQuarantineTest, AQuarantinedRowOfAnUnroutedTopicHoldsNoOtherTopicUp) {
  server_.Post("/events", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  server_.Start();
  InsertPlain("retired.topic", "k1");
  app_->exec("UPDATE outbox SET quarantined = 1, crashes = 1 WHERE topic = 'retired.topic'");
  Options options = BaseOptions();
  options.sweep_interval_ms = 20;
  options.topics["orders"] = HttpTopic();
  Agent agent(options);
  agent.Start();
  Commit(&agent, "orders", "o1");
  InsertPlain("orders", "o2");  // the sweeper's path
  agent.NotifyExternalCommit();
  EXPECT_TRUE(outbox::testing::WaitFor(
      [&] { return CountStatus(store::Status::kDelivered) == 2; }, 10s))
      << CountStatus(store::Status::kDelivered) << " delivered";
  EXPECT_TRUE(outbox::testing::WaitFor(
      [&] { return agent.Snapshot().quarantined_unrouted == 1; }, 10s));
  agent.Stop();
  EXPECT_EQ(CountStatus(store::Status::kPending), 1);  // the retired topic's row waits
}

}  // namespace
}  // namespace outbox::agent
