// The delivery worker with a real database and a handler in place of HTTP.
#include "delivery_worker.h"

#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>

#include <mutex>

#include "../common/temp_dir.h"
#include "agent_fixture.h"

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
  // As if it queued for a minute: its lease ended on the boot clock, which
  // is what decides (the wall clock may have been set since).
  ASSERT_TRUE(batch[0].lease_boot_until);
  batch[0].lease_boot_until = rt_.clock->Boot().ms - 1;
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

// One request is one breaker event: a batch of five refused by a 503 counts
// one failure, not five, and charges every member alike.
TEST_F(DeliveryWorkerTest, AFailedBatchIsOneBreakerEventAndOneDecisionForEveryMember) {
  UseHandler({Outcome::kEndpointFailure, 503, false, std::nullopt, "HTTP 503"});
  BreakerOptions breaker;
  breaker.failure_threshold = 2;
  route_.breaker = std::make_shared<Breaker>("handler:t", breaker, rt_.clock, 1000);
  route_.options.endpoint.batch.max_messages = 5;
  auto batch = EnqueueAndClaim(5);
  ASSERT_EQ(batch.size(), 5u);
  // The endpoint acknowledged something after these rows were written: an
  // endpoint failure now costs each of them an attempt.
  route_.breaker->OnSuccess(rt_.clock->WallMs() + 1);
  rt_.sending = 5;
  DeliveryWorker(rt_).Work(route_, 0, batch);
  EXPECT_EQ(route_.breaker->mode(), Breaker::Mode::kClosed);
  rt_.writer->Run([](store::Store&) {});
  store::Options read = rt_.store_options;
  read.create = false;
  store::Store reader(read);
  for (const auto& c : batch) {
    const auto row = reader.Get(c.lease.id);
    ASSERT_TRUE(row);
    EXPECT_EQ(row->status, store::Status::kPending) << c.lease.id;
    EXPECT_EQ(row->attempts, 1) << c.lease.id;
  }
}

// --- runs of one ordering key (docs/ordering.md, "Runs") ---------------------

// Answers from a script by call number (1, 2, ...); records the keys sent.
class RunHandler final : public Handler {
 public:
  explicit RunHandler(std::function<HandlerResult(int call)> script) : script_(std::move(script)) {}
  HandlerResult Handle(const Delivery& d) override {
    std::lock_guard lock(mutex_);
    sent_.emplace_back(d.key);
    return script_(static_cast<int>(sent_.size()));
  }
  std::vector<std::string> sent() {
    std::lock_guard lock(mutex_);
    return sent_;
  }

 private:
  std::function<HandlerResult(int call)> script_;
  std::mutex mutex_;
  std::vector<std::string> sent_;  // guarded by mutex_
};

class RunTest : public DeliveryWorkerTest {
 protected:
  void UseScript(std::function<HandlerResult(int call)> script) {
    run_handler_ = std::make_shared<RunHandler>(std::move(script));
    route_.name = "t";
    route_.handler = run_handler_;
    route_.breaker = std::make_shared<Breaker>("handler:t", BreakerOptions{}, rt_.clock, 1000);
    route_.options.ordering = {true, store::DeadHead::kBlock};
    route_.options.breaker.failure_threshold = 1000;
  }

  // One worker sends `run` as a run, as the dispatcher would hand it over.
  void SendRun(std::vector<store::Claimed>& run) {
    rt_.sending = static_cast<std::int64_t>(run.size());
    DeliveryWorker(rt_).Work(route_, 0, run, true);
  }

  // `n` rows of ordering key "a" (msg_key r1..rn), claimed as one run.
  std::vector<store::Claimed> EnqueueAndClaimRun(int n) {
    std::vector<store::Claimed> run;
    rt_.writer->Run([&](store::Store& s) {
      s.AgreeOrdering("t", {true, store::DeadHead::kBlock}, rt_.clock->WallMs());
      store::Producer producer(s.connection());
      for (int i = 1; i <= n; ++i) {
        store::NewMessage m;
        m.topic = "t";
        m.key = "r" + std::to_string(i);
        m.payload = "{}";
        m.ordering_key = "a";
        producer.Enqueue(m);
      }
      const std::int64_t now = rt_.clock->WallMs();
      auto head = s.ClaimNextOfKey("t", "a", rt_.owner, now + 60'000, now);
      if (!head) return;
      run.push_back(*head);
      for (auto& c : s.ClaimRunAfter(head->lease, "t", "a", rt_.owner, now + 60'000, now, n - 1,
                                     1 << 20)) {
        run.push_back(c);
      }
    });
    return run;
  }

  store::Row RowOf(std::int64_t id) {
    rt_.writer->Run([](store::Store&) {});  // everything queued before is applied
    store::Options read = rt_.store_options;
    read.create = false;
    return *store::Store(read).Get(id);
  }

  void ExpectHandedBackUnsent(const store::Claimed& c) {
    const store::Row row = RowOf(c.lease.id);
    EXPECT_EQ(row.status, store::Status::kPending) << row.key;
    EXPECT_EQ(row.attempts, 0) << row.key;
    EXPECT_FALSE(row.last_attempt_at) << row.key;
  }

  std::shared_ptr<RunHandler> run_handler_;
};

TEST_F(RunTest, SendsARunInIdOrderAndCompletesEveryRow) {
  UseScript([](int) { return HandlerResult{}; });
  auto run = EnqueueAndClaimRun(5);
  ASSERT_EQ(run.size(), 5u);
  SendRun(run);
  EXPECT_EQ(run_handler_->sent(), (std::vector<std::string>{"r1", "r2", "r3", "r4", "r5"}));
  for (const auto& c : run) EXPECT_EQ(RowOf(c.lease.id).status, store::Status::kDelivered);
  EXPECT_EQ(rt_.sending.load(), 0);
}

TEST_F(RunTest, AFailureInTheMiddleHandsTheRestBackUnsentWithoutCountingAttempts) {
  // The third row is refused: it counts its attempt (and goes dead); the
  // rows behind it were never sent and go back as they were.
  UseScript([](int call) {
    return call == 3 ? HandlerResult{Outcome::kMessageFailure, 422, false, std::nullopt, "no"}
                     : HandlerResult{};
  });
  auto run = EnqueueAndClaimRun(5);
  ASSERT_EQ(run.size(), 5u);
  SendRun(run);
  EXPECT_EQ(run_handler_->sent(), (std::vector<std::string>{"r1", "r2", "r3"}));
  EXPECT_EQ(RowOf(run[1].lease.id).status, store::Status::kDelivered);
  const store::Row failed = RowOf(run[2].lease.id);
  EXPECT_EQ(failed.status, store::Status::kDead);
  EXPECT_EQ(failed.attempts, 1);
  ExpectHandedBackUnsent(run[3]);
  ExpectHandedBackUnsent(run[4]);
  EXPECT_EQ(rt_.sending.load(), 0);
}

TEST_F(RunTest, AnEndpointFailureReschedulesTheRowAndHandsBackTheRest) {
  UseScript([](int call) {
    return call == 2 ? HandlerResult{Outcome::kEndpointFailure, 503, false, std::nullopt, "busy"}
                     : HandlerResult{};
  });
  auto run = EnqueueAndClaimRun(4);
  SendRun(run);
  EXPECT_EQ(run_handler_->sent(), (std::vector<std::string>{"r1", "r2"}));
  const store::Row failed = RowOf(run[1].lease.id);
  EXPECT_EQ(failed.status, store::Status::kPending);
  EXPECT_EQ(failed.attempts, 1);
  ExpectHandedBackUnsent(run[2]);
  ExpectHandedBackUnsent(run[3]);
}

TEST_F(RunTest, ALapsedLeaseStopsTheRun) {
  auto clock = std::make_shared<testing::FakeClock>();
  rt_.clock = clock;
  // The second send outlasts the run's lease (60 s): another agent may have
  // taken the rows behind it meanwhile, so none of them is sent.
  UseScript([&](int call) {
    if (call == 2) clock->Advance(std::chrono::milliseconds(61'000));
    return HandlerResult{};
  });
  auto run = EnqueueAndClaimRun(4);
  SendRun(run);
  EXPECT_EQ(run_handler_->sent(), (std::vector<std::string>{"r1", "r2"}));
  EXPECT_EQ(RowOf(run[1].lease.id).status, store::Status::kDelivered);
  ExpectHandedBackUnsent(run[2]);
  ExpectHandedBackUnsent(run[3]);
}

TEST_F(RunTest, AStopDuringASendLeavesNoRowOfTheRunInFlight) {
  UseScript([&](int call) {
    if (call == 2) rt_.stopping = true;  // Stop() began while row 2 was on the wire
    return HandlerResult{};
  });
  auto run = EnqueueAndClaimRun(4);
  SendRun(run);
  EXPECT_EQ(run_handler_->sent(), (std::vector<std::string>{"r1", "r2"}));
  EXPECT_EQ(RowOf(run[1].lease.id).status, store::Status::kDelivered);
  ExpectHandedBackUnsent(run[2]);
  ExpectHandedBackUnsent(run[3]);
  rt_.writer->Run([&](store::Store& s) { EXPECT_TRUE(s.LeaseOwners().empty()); });
}

}  // namespace
}  // namespace outbox::agent
