#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include "outbox/store.h"

namespace outbox::store {
namespace {

// The application's connection and the store share one in-memory database.
class ProducerTest : public ::testing::Test {
 protected:
  ProducerTest() : store_(MemoryOptions()), app_(store_.connection()), producer_(app_) {
    app_.exec("CREATE TABLE orders(id INTEGER PRIMARY KEY, note TEXT)");
  }

  static Options MemoryOptions() {
    Options options;
    options.path = ":memory:";
    options.create = true;
    return options;
  }

  static NewMessage Message(std::string key, std::string payload = "{}") {
    NewMessage message;
    message.topic = "order.created";
    message.key = std::move(key);
    message.payload = std::move(payload);
    return message;
  }

  std::int64_t Count(const std::string& table) {
    SQLite::Statement q(app_, "SELECT count(*) FROM " + table);
    q.executeStep();
    return q.getColumn(0).getInt64();
  }

  // Runs `bad` inside an application transaction that already wrote a
  // business row, expects `E` naming `field`, then proves the transaction is
  // still usable and commits the business row alone.
  template <typename E>
  void ExpectRefusedAndTransactionUsable(const NewMessage& bad, const std::string& field) {
    const std::int64_t orders = Count("orders");
    const std::int64_t rows = Count("outbox");
    app_.exec("BEGIN IMMEDIATE");
    app_.exec("INSERT INTO orders(note) VALUES('before')");
    try {
      producer_.Enqueue(bad);
      ADD_FAILURE() << "expected a refusal naming " << field;
    } catch (const E& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
    app_.exec("INSERT INTO orders(note) VALUES('after')");
    producer_.Enqueue(Message("fine-" + std::to_string(rows)));
    app_.exec("COMMIT");
    EXPECT_EQ(Count("orders"), orders + 2);
    EXPECT_EQ(Count("outbox"), rows + 1);
  }

  Store store_;
  SQLite::Database& app_;
  Producer producer_;
};

TEST_F(ProducerTest, CommitLeavesExactlyOneMessage) {
  app_.exec("BEGIN IMMEDIATE");
  app_.exec("INSERT INTO orders(note) VALUES('x')");
  const EnqueueResult result = producer_.Enqueue(Message("order-1"));
  app_.exec("COMMIT");
  EXPECT_TRUE(result.inserted);
  EXPECT_EQ(Count("outbox"), 1);
  auto row = store_.Get(result.id);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->status, Status::kPending);
  EXPECT_EQ(row->key, "order-1");
}

TEST_F(ProducerTest, RollbackLeavesNoMessage) {
  app_.exec("BEGIN IMMEDIATE");
  app_.exec("INSERT INTO orders(note) VALUES('x')");
  producer_.Enqueue(Message("order-1"));
  app_.exec("ROLLBACK");
  EXPECT_EQ(Count("outbox"), 0);
  EXPECT_EQ(Count("orders"), 0);
  EXPECT_EQ(store_.GetStats().undelivered, 0);
}

TEST_F(ProducerTest, RefusesWithoutATransactionUnlessStandalone) {
  try {
    producer_.Enqueue(Message("order-1"));
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no open transaction"), std::string::npos);
  }
  EXPECT_EQ(Count("outbox"), 0);
  EnqueueOptions standalone;
  standalone.standalone = true;
  EXPECT_TRUE(producer_.Enqueue(Message("order-1"), standalone).inserted);
  EXPECT_EQ(Count("outbox"), 1);
}

TEST_F(ProducerTest, DuplicateKeyIsAClearError) {
  EnqueueOptions standalone;
  standalone.standalone = true;
  producer_.Enqueue(Message("order-1"), standalone);
  ExpectRefusedAndTransactionUsable<DuplicateError>(Message("order-1"), "already exists");
}

TEST_F(ProducerTest, IdempotentEnqueueReturnsTheExistingId) {
  EnqueueOptions options;
  options.standalone = true;
  const EnqueueResult first = producer_.Enqueue(Message("order-1"), options);
  options.idempotent = true;
  const EnqueueResult again = producer_.Enqueue(Message("order-1"), options);
  EXPECT_EQ(again.id, first.id);
  EXPECT_FALSE(again.inserted);
  EXPECT_EQ(Count("outbox"), 1);
}

TEST_F(ProducerTest, SameKeyOnAnotherTopicIsADifferentMessage) {
  EnqueueOptions standalone;
  standalone.standalone = true;
  NewMessage other = Message("order-1");
  other.topic = "order.paid";
  producer_.Enqueue(Message("order-1"), standalone);
  EXPECT_TRUE(producer_.Enqueue(other, standalone).inserted);
}

TEST_F(ProducerTest, EmptyTopicIsRefused) {
  NewMessage bad = Message("k");
  bad.topic = "";
  ExpectRefusedAndTransactionUsable<std::invalid_argument>(bad, "topic");
}

TEST_F(ProducerTest, EmptyOrLongKeyIsRefused) {
  ExpectRefusedAndTransactionUsable<std::invalid_argument>(Message(""), "msg_key");
  ExpectRefusedAndTransactionUsable<std::invalid_argument>(Message(std::string(256, 'k')),
                                                           "msg_key");
}

TEST_F(ProducerTest, MalformedHeadersAreRefused) {
  for (const char* headers :
       {"not json", "[1,2]", "{\"a\": 1}", "{\"a\": \"line\\r\\nbreak\"}",
        "{\"bad\\nname\": \"v\"}", "\"str\"", "{\"a\": {\"b\": \"c\"}}"}) {
    NewMessage bad = Message("k");
    bad.headers_json = headers;
    SCOPED_TRACE(headers);
    ExpectRefusedAndTransactionUsable<std::invalid_argument>(bad, "headers");
  }
}

TEST_F(ProducerTest, WellFormedHeadersAreStored) {
  NewMessage message = Message("k");
  message.headers_json = R"({"Content-Type": "text/plain", "X-Trace": "abc"})";
  EnqueueOptions standalone;
  standalone.standalone = true;
  const auto id = producer_.Enqueue(message, standalone).id;
  EXPECT_EQ(store_.Get(id)->headers_json, message.headers_json);
}

TEST_F(ProducerTest, PayloadOverTheLimitIsRefused) {
  Limits limits;
  limits.max_payload_bytes = 16;
  store_.SetLimits(limits);
  ExpectRefusedAndTransactionUsable<std::invalid_argument>(Message("k", std::string(17, 'p')),
                                                           "max_payload_bytes");
  EnqueueOptions standalone;
  standalone.standalone = true;
  EXPECT_TRUE(producer_.Enqueue(Message("exact", std::string(16, 'p')), standalone).inserted);
}

TEST_F(ProducerTest, BinaryPayloadRoundTrips) {
  std::string payload("\0\xff\x01 not utf-8 \xc3\x28", 16);
  EnqueueOptions standalone;
  standalone.standalone = true;
  const auto id = producer_.Enqueue(Message("bin", payload), standalone).id;
  EXPECT_EQ(store_.Get(id)->payload, payload);
}

TEST_F(ProducerTest, MaxPendingRefusesWithCapacityError) {
  Limits limits;
  limits.max_pending = 2;
  store_.SetLimits(limits);
  EnqueueOptions standalone;
  standalone.standalone = true;
  producer_.Enqueue(Message("a"), standalone);
  producer_.Enqueue(Message("b"), standalone);
  app_.exec("BEGIN IMMEDIATE");
  app_.exec("INSERT INTO orders(note) VALUES('kept')");
  EXPECT_THROW(producer_.Enqueue(Message("c")), CapacityError);
  app_.exec("COMMIT");
  EXPECT_EQ(Count("orders"), 1);
  EXPECT_EQ(Count("outbox"), 2);
  // Delivering one frees a slot.
  auto claimed = store_.ClaimById(1, "me", 0, 0);
  ASSERT_TRUE(claimed);
  store_.Complete(claimed->lease, 0);
  EXPECT_TRUE(producer_.Enqueue(Message("c"), standalone).inserted);
}

TEST_F(ProducerTest, PlainSqlInsertsObeyTheLimitsToo) {
  Limits limits;
  limits.max_payload_bytes = 4;
  store_.SetLimits(limits);
  try {
    app_.exec("INSERT INTO outbox(topic, msg_key, payload) VALUES('t', 'k', 'too long')");
    FAIL() << "expected the trigger to refuse";
  } catch (const SQLite::Exception& e) {
    EXPECT_NE(std::string(e.what()).find("max_payload_bytes"), std::string::npos);
  }
  try {
    app_.exec("INSERT INTO outbox(topic, msg_key, payload, headers) VALUES('t', 'k', 'ok', '[]')");
    FAIL() << "expected the trigger to refuse";
  } catch (const SQLite::Exception& e) {
    EXPECT_NE(std::string(e.what()).find("headers"), std::string::npos);
  }
  EXPECT_EQ(Count("outbox"), 0);
}

TEST_F(ProducerTest, PerRowRetryPolicyIsStored) {
  NewMessage message = Message("k");
  message.retry.max_attempts = 3;
  message.retry.backoff = Backoff::kFixed;
  message.retry.first_interval_ms = 250;
  EnqueueOptions standalone;
  standalone.standalone = true;
  const auto row = store_.Get(producer_.Enqueue(message, standalone).id);
  EXPECT_EQ(row->retry.max_attempts, 3);
  EXPECT_EQ(row->retry.backoff, Backoff::kFixed);
  EXPECT_EQ(row->retry.first_interval_ms, 250);
  message.key = "bad";
  message.retry.max_attempts = 0;
  ExpectRefusedAndTransactionUsable<std::invalid_argument>(message, "max_attempts");
}

TEST(Producer, RefusesAConnectionWithoutTheSchema) {
  SQLite::Database app(":memory:", SQLite::OPEN_READWRITE);
  EXPECT_THROW(Producer producer(app), NotAnOutboxError);
}

}  // namespace
}  // namespace outbox::store
