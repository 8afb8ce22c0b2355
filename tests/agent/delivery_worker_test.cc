// The delivery worker with a real database and a handler in place of HTTP.
#include "delivery_worker.h"

#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>

#include "../common/temp_dir.h"

namespace outbox::agent {
namespace {

class CountingHandler final : public Handler {
 public:
  explicit CountingHandler(HandlerResult answer) : answer_(std::move(answer)) {}
  HandlerResult Handle(const Delivery&) override {
    ++calls;
    return answer_;
  }
  std::atomic<int> calls{0};

 private:
  HandlerResult answer_;
};

class DeliveryWorkerTest : public ::testing::Test {
 protected:
  DeliveryWorkerTest() {
    rt_.clock = SystemClock();
    rt_.log = std::make_shared<spdlog::logger>("test",
                                               std::make_shared<spdlog::sinks::null_sink_mt>());
    rt_.metrics = std::make_shared<Metrics>();
    rt_.owner = "test-owner";
    rt_.store_options.path = dir_.File("app.db");
    rt_.store_options.create = true;
    rt_.writer = std::make_unique<Writer>(rt_.store_options, rt_.log);
    rt_.database_id = rt_.writer->database_id();
  }

  void UseHandler(HandlerResult answer) {
    handler_ = std::make_shared<CountingHandler>(std::move(answer));
    route_.name = "t";
    route_.handler = handler_;
    route_.breaker = std::make_shared<Breaker>("handler:t", BreakerOptions{}, rt_.clock, 1000);
  }

  // Enqueues `n` rows and claims them as the sweeper would.
  std::vector<store::Claimed> EnqueueAndClaim(int n) {
    std::vector<store::Claimed> claimed;
    rt_.writer->Run([&](store::Store& s) {
      SQLite::Database& db = s.connection();
      store::Producer producer(db);
      for (int i = 0; i < n; ++i) producer.Enqueue({"t", "k" + std::to_string(i), "{}", "", {}});
      const std::int64_t now = rt_.clock->WallMs();
      claimed = s.ClaimDue("t", rt_.owner, now + 60'000, now, n);
    });
    return claimed;
  }

  store::Status StatusOf(std::int64_t id) {
    rt_.writer->Run([](store::Store&) {});  // everything queued before is applied
    store::Options read = rt_.store_options;
    read.path = dir_.File("app.db");
    read.create = false;
    return store::Store(read).Get(id)->status;
  }

  outbox::testing::TempDir dir_;
  Runtime rt_;
  Route route_;
  std::shared_ptr<CountingHandler> handler_;
};

TEST_F(DeliveryWorkerTest, SendsAndCompletesABatch) {
  UseHandler({});
  route_.options.endpoint.batch.max_messages = 3;  // the pool forms batches of 3
  auto batch = EnqueueAndClaim(3);
  ASSERT_EQ(batch.size(), 3u);
  rt_.sending = 3;
  DeliveryWorker(rt_).Work(route_, 0, batch);
  EXPECT_EQ(handler_->calls.load(), 3);
  for (const auto& c : batch) EXPECT_EQ(StatusOf(c.lease.id), store::Status::kDelivered);
  EXPECT_EQ(rt_.sending.load(), 0);
}

TEST_F(DeliveryWorkerTest, SendsWhatTheClaimReturnedWithoutReadingTheFile) {
  UseHandler({});
  auto batch = EnqueueAndClaim(1);  // one at a time: the route has no batching
  ASSERT_EQ(batch.size(), 1u);
  // Any connection the worker opened now would fail: it needs none, the
  // claim returned the rows.
  rt_.store_options.path = dir_.File("gone.db");
  rt_.sending = 1;
  DeliveryWorker(rt_).Work(route_, 0, batch);
  EXPECT_EQ(handler_->calls.load(), 1);
  for (const auto& c : batch) EXPECT_EQ(StatusOf(c.lease.id), store::Status::kDelivered);
  EXPECT_EQ(rt_.sending.load(), 0);
}

// A row that waited in the queue past its lease may already be another
// agent's: it goes back unsent instead of being sent a second time.
TEST_F(DeliveryWorkerTest, ARowWhoseLeaseLapsedInTheQueueIsHandedBackUnsent) {
  UseHandler({});
  auto batch = EnqueueAndClaim(2);
  ASSERT_EQ(batch.size(), 2u);
  batch[0].row.lease_expires_at = rt_.clock->WallMs() - 1;  // as if it queued for a minute
  rt_.sending = 2;
  DeliveryWorker(rt_).Work(route_, 0, batch);
  EXPECT_EQ(handler_->calls.load(), 1);
  EXPECT_EQ(StatusOf(batch[0].lease.id), store::Status::kPending);
  EXPECT_EQ(StatusOf(batch[1].lease.id), store::Status::kDelivered);
  EXPECT_EQ(rt_.sending.load(), 0);
}

TEST_F(DeliveryWorkerTest, AMessageFailureIsDeadAndCountsTheAttempt) {
  UseHandler({Outcome::kMessageFailure, 422, false, std::nullopt, "bad order"});
  auto batch = EnqueueAndClaim(1);
  rt_.sending = 1;
  DeliveryWorker(rt_).Work(route_, 0, batch);
  EXPECT_EQ(StatusOf(batch[0].lease.id), store::Status::kDead);
  EXPECT_EQ(rt_.metrics->Snapshot().topics.at("other").dead, 1);
}

TEST_F(DeliveryWorkerTest, GoneMarksTheBreakerAndReschedulesWithoutCost) {
  UseHandler({Outcome::kMessageFailure, 410, true, std::nullopt, ""});
  auto batch = EnqueueAndClaim(1);
  rt_.sending = 1;
  DeliveryWorker(rt_).Work(route_, 0, batch);
  EXPECT_EQ(route_.breaker->mode(), Breaker::Mode::kGone);
  EXPECT_EQ(StatusOf(batch[0].lease.id), store::Status::kPending);
}

}  // namespace
}  // namespace outbox::agent
