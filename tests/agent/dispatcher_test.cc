// The dispatcher with a real database and pools whose work the test holds.
#include "dispatcher.h"

#include <gtest/gtest.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>

#include <future>

#include "../common/temp_dir.h"

namespace outbox::agent {
namespace {

class NoopHandler final : public Handler {
 public:
  HandlerResult Handle(const Delivery&) override { return {}; }
};

class DispatcherTest : public ::testing::Test {
 protected:
  DispatcherTest() : routes_(SystemClock()), dispatcher_(rt_, routes_) {
    rt_.clock = SystemClock();
    rt_.log = std::make_shared<spdlog::logger>("test",
                                               std::make_shared<spdlog::sinks::null_sink_mt>());
    rt_.metrics = std::make_shared<Metrics>();
    rt_.owner = "test-owner";
    rt_.store_options.path = dir_.File("app.db");
    rt_.store_options.create = true;
    rt_.writer = std::make_unique<Writer>(rt_.store_options, rt_.log);
    routes_.Build({}, {{"a", std::make_shared<NoopHandler>()}});
    // One worker that holds the first lease it gets until released, and a
    // queue of two.
    Route& route = *routes_.For("a");
    route.pool = std::make_unique<WorkerPool>(
        "a", 1, WorkerPool::Capacity{2}, 1,
        [this](int, std::vector<store::Claimed>& batch, bool) {
          taken_.fetch_add(static_cast<int>(batch.size()));
          if (!started_once_.exchange(true)) {
            started_.set_value();
            release_.get_future().wait();
          }
        },
        nullptr);
  }
  ~DispatcherTest() override {
    if (!released_) release_.set_value();
    routes_.For("a")->pool->StopIntake();
    routes_.For("a")->pool->Join();
  }

  std::vector<store::Claimed> EnqueueAndClaim(const std::string& topic, int n) {
    std::vector<store::Claimed> claimed;
    rt_.writer->Run([&](store::Store& s) {
      store::Producer producer(s.connection());
      for (int i = 0; i < n; ++i) producer.Enqueue({topic, topic + std::to_string(i), "{}", "", {}});
      const std::int64_t now = rt_.clock->WallMs();
      claimed = s.ClaimDue(topic, rt_.owner, now + 60'000, now, n);
    });
    return claimed;
  }
  store::Status StatusOf(std::int64_t id) {
    rt_.writer->Run([](store::Store&) {});
    store::Options read = rt_.store_options;
    read.create = false;
    return store::Store(read).Get(id)->status;
  }

  outbox::testing::TempDir dir_;
  Runtime rt_;
  RouteTable routes_;
  Dispatcher dispatcher_;
  std::atomic<int> taken_{0};
  std::atomic<bool> started_once_{false};
  std::promise<void> started_;
  std::promise<void> release_;
  bool released_ = false;
};

TEST_F(DispatcherTest, RowsWithoutARouteGoBackToPending) {
  const auto claimed = EnqueueAndClaim("nobody", 2);
  ASSERT_EQ(claimed.size(), 2u);
  dispatcher_.DispatchAll(claimed);
  for (const auto& c : claimed) EXPECT_EQ(StatusOf(c.lease.id), store::Status::kPending);
  EXPECT_EQ(rt_.sending.load(), 0);
}

TEST_F(DispatcherTest, WhatAFullPoolRefusesGoesBackAndMarksABacklog) {
  const auto first = EnqueueAndClaim("a", 1);
  dispatcher_.DispatchAll(first);
  started_.get_future().wait();  // the only worker now holds the first row
  std::vector<store::Claimed> more;
  rt_.writer->Run([&](store::Store& s) {
    store::Producer producer(s.connection());
    for (int i = 0; i < 3; ++i) producer.Enqueue({"a", "more" + std::to_string(i), "{}", "", {}});
    const std::int64_t now = rt_.clock->WallMs();
    more = s.ClaimDue("a", rt_.owner, now + 60'000, now, 3);
  });
  ASSERT_EQ(more.size(), 3u);
  dispatcher_.DispatchAll(more);
  // Two fit the queue; the third is reverted at once.
  EXPECT_EQ(StatusOf(more[2].lease.id), store::Status::kPending);
  EXPECT_EQ(StatusOf(more[0].lease.id), store::Status::kInFlight);
  EXPECT_TRUE(routes_.For("a")->backlog.load());
  EXPECT_EQ(rt_.sending.load(), 3);  // 1 running + 2 queued (no worker reports here)
  EXPECT_EQ(rt_.metrics->Snapshot().topics.at("other").pool_rejections, 1);
  released_ = true;
  release_.set_value();
}

TEST_F(DispatcherTest, AStoppingAgentRevertsInsteadOfDispatching) {
  const auto claimed = EnqueueAndClaim("a", 1);
  rt_.stopping = true;
  dispatcher_.DispatchAll(claimed);
  EXPECT_EQ(StatusOf(claimed[0].lease.id), store::Status::kPending);
  EXPECT_EQ(taken_.load(), 0);
}

// The claim of a completed key's next row (SuccessorClaims) takes nothing
// while the agent stops or takes back a crashed agent's rows, as the eager
// path does, and takes the row otherwise.
TEST_F(DispatcherTest, NextOfKeyClaimsTakeNothingWhileStoppingOrOnProbation) {
  std::int64_t id = 0;
  const auto claim = [&] {
    std::size_t claimed = 0;
    rt_.writer->Run([&](store::Store& s) {
      const std::string keys[] = {"k"};
      claimed = dispatcher_.Claim(s, "a", keys).size();
    });
    return claimed;
  };
  rt_.writer->Run([&](store::Store& s) {
    s.AgreeOrdering("a", {true, store::DeadHead::kBlock}, rt_.clock->WallMs());
    store::NewMessage message{"a", "m1", "{}", "", {}};
    message.ordering_key = "k";
    id = store::Producer(s.connection()).Enqueue(message).id;
  });
  rt_.stopping = true;
  EXPECT_EQ(claim(), 0u);
  rt_.stopping = false;
  rt_.probation = true;
  EXPECT_EQ(claim(), 0u);
  EXPECT_EQ(StatusOf(id), store::Status::kPending);
  rt_.probation = false;
  EXPECT_EQ(claim(), 1u);
  EXPECT_EQ(StatusOf(id), store::Status::kInFlight);
}

}  // namespace
}  // namespace outbox::agent
