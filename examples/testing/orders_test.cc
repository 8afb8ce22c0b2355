// Testing an application that uses the outbox (docs/testing.md): each test
// gets a fresh in-memory database, an agent on it, a clock it moves and a
// scripted receiver. Nothing sleeps: Agent::RunDue() returns once every due
// delivery and retry is done.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>

#include <chrono>

#include "orders.h"
#include "outbox/testing.h"

namespace {

using namespace std::chrono_literals;
namespace testing_kit = outbox::testing;

class OrdersTest : public ::testing::Test {
 protected:
  OrdersTest() {
    orders::CreateSchema(db_.connection());
    db_.connection().exec("INSERT INTO stock VALUES('book', 10), ('lamp', 0)");
  }

  // The agent as the application runs it, on the test's database and clock.
  std::unique_ptr<outbox::agent::Agent> StartAgent() {
    outbox::agent::Options options;
    options.db_path = db_.path();
    options.clock = clock_;
    options.topics[orders::kTopic] = orders::Route(receiver_.Url("/orders"));
    auto agent = std::make_unique<outbox::agent::Agent>(options);
    agent->Start();
    return agent;
  }

  std::string OrderState(std::int64_t id) {
    SQLite::Statement q(db_.connection(), "SELECT state FROM orders WHERE id = ?");
    q.bind(1, id);
    q.executeStep();
    return q.getColumn(0).getString();
  }

  testing_kit::InMemoryDatabase db_;
  std::shared_ptr<testing_kit::TestClock> clock_ = std::make_shared<testing_kit::TestClock>();
  testing_kit::TestReceiver receiver_;
};

// Story 1: placing an order enqueues order.created with this payload. No
// agent at all: the test reads what the transaction committed.
TEST_F(OrdersTest, PlacingAnOrderEnqueuesOrderCreatedWithItsPayload) {
  orders::Orders shop(db_.connection(), db_.producer(), nullptr);
  const std::int64_t id = shop.Place("c-7", "book");
  testing_kit::Expect expect(db_.path());
  EXPECT_EQ(expect.Enqueued({.topic = "order.created",
                             .key = "order-" + std::to_string(id),
                             .payload = R"({"order":1,"customer":"c-7","item":"book"})",
                             .ordering_key = "c-7"},
                            1),
            std::nullopt);
}

// Story 2: a rolled-back order sends nothing.
TEST_F(OrdersTest, AnOrderRolledBackSendsNothing) {
  auto agent = StartAgent();
  orders::Orders shop(db_.connection(), db_.producer(), agent.get());
  EXPECT_THROW(shop.Place("c-7", "lamp"), SQLite::Exception);  // out of stock
  ASSERT_TRUE(agent->RunDue());
  EXPECT_EQ(testing_kit::Expect(db_.path()).NothingEnqueued(), std::nullopt);
  EXPECT_EQ(receiver_.RequestCount(), 0u);
}

// Story 3: the receiver answers 503 twice; after two retries (the clock
// moved on, nobody waited) the order is delivered.
TEST_F(OrdersTest, TwoServiceUnavailableAnswersThenDeliveredAfterTwoRetries) {
  receiver_.Then(503).Then(503).Then(200);
  auto agent = StartAgent();
  orders::Orders shop(db_.connection(), db_.producer(), agent.get());
  shop.Place("c-7", "book");
  const std::int64_t message = testing_kit::Recorder(db_.path()).Enqueued("order.created")[0].id;
  ASSERT_TRUE(agent->RunDue());  // first try: 503
  for (int retry = 0; retry < 2; ++retry) {
    clock_->Advance(1h);
    ASSERT_TRUE(agent->RunDue());
  }
  const testing_kit::MessageHistory history = testing_kit::History(db_.path(), receiver_, message);
  EXPECT_EQ(history.message->status, outbox::store::Status::kDelivered) << history.Describe();
  ASSERT_EQ(history.requests.size(), 3u) << history.Describe();
  EXPECT_EQ(history.requests[2].body, R"({"order":1,"customer":"c-7","item":"book"})");
}

// Story 4: a message the receiver keeps refusing is dead after
// retry.max_attempts, and on_dead marks the order. A 5xx costs an attempt
// only while the receiver accepts other messages (an outage costs none), so
// the receiver refuses this order alone and other orders go through.
TEST_F(OrdersTest, AnOrderTheReceiverKeepsRefusingIsDeadAndMarkedUnconfirmed) {
  receiver_.Always(
      [](const testing_kit::ReceivedRequest& r) {
        return r.body.find(R"("customer":"c-13")") != std::string::npos;
      },
      {.status = 500});
  auto agent = StartAgent();
  orders::Orders shop(db_.connection(), db_.producer(), agent.get());
  const std::int64_t refused = shop.Place("c-13", "book");
  ASSERT_TRUE(agent->RunDue());
  for (int round = 0; round < 5; ++round) {
    // Another order is acknowledged after the refused one's last failure
    // (times are in ms: a moment later, not in the same millisecond) ...
    clock_->Advance(10ms);
    shop.Place("c-" + std::to_string(round), "book");
    ASSERT_TRUE(agent->RunDue());
    clock_->Advance(24h);  // ... then the refused one's retry is due
    ASSERT_TRUE(agent->RunDue());
  }
  EXPECT_EQ(OrderState(refused), "unconfirmed");
  EXPECT_EQ(testing_kit::Expect(db_.path())
                .Enqueued({.topic = "order.created",
                           .key = "order-" + std::to_string(refused),
                           .status = outbox::store::Status::kDead},
                          1),
            std::nullopt);
}

// Story 5: a customer's orders arrive in the order they were placed, also
// when the first one failed once.
TEST_F(OrdersTest, OrdersOfOneCustomerArriveInOrderAcrossAFailure) {
  receiver_.Then(503);
  auto agent = StartAgent();
  orders::Orders shop(db_.connection(), db_.producer(), agent.get());
  for (int i = 0; i < 3; ++i) shop.Place("c-7", "book");
  ASSERT_TRUE(agent->RunDue());
  clock_->Advance(1h);
  ASSERT_TRUE(agent->RunDue());
  std::vector<std::string> received;
  for (const auto& request : receiver_.Requests()) received.push_back(request.body.substr(0, 10));
  EXPECT_EQ(received, (std::vector<std::string>{R"({"order":1)", R"({"order":1)", R"({"order":2)",
                                                R"({"order":3)"}));
}

// The cost of a test like these: each of 100 makes a database, an agent and
// a receiver and delivers one order (docs/testing.md gives the figure).
class FreshOutbox : public OrdersTest, public ::testing::WithParamInterface<int> {};

TEST_P(FreshOutbox, DeliversOneOrder) {
  auto agent = StartAgent();
  orders::Orders shop(db_.connection(), db_.producer(), agent.get());
  shop.Place("c-" + std::to_string(GetParam()), "book");
  ASSERT_TRUE(agent->RunDue());
  EXPECT_EQ(receiver_.RequestCount(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Hundred, FreshOutbox, ::testing::Range(0, 100));

}  // namespace
