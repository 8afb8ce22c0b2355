// The message attributes of schema 4: schema_version, ordering_key,
// deliver_at, expires_at and dead_reason, through the Producer and through
// plain SQL, as other applications write them.
#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "outbox/store.h"

namespace outbox::store {
namespace {

std::int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class MessageAttributesTest : public ::testing::Test {
 protected:
  MessageAttributesTest() : store_(MemoryOptions()), producer_(store_.connection()) {}

  static Options MemoryOptions() {
    Options options;
    options.path = ":memory:";
    options.create = true;
    return options;
  }

  static NewMessage Message(std::string key) {
    NewMessage message;
    message.topic = "device.config";
    message.key = std::move(key);
    message.payload = "{}";
    return message;
  }

  std::int64_t Enqueue(const NewMessage& message) {
    return producer_.Enqueue(message, {.standalone = true}).id;
  }

  // Runs plain SQL and returns SQLite's error text, or "" when it worked.
  std::string PlainSqlError(const std::string& statement) {
    try {
      store_.connection().exec(statement);
      return "";
    } catch (const SQLite::Exception& e) {
      return e.what();
    }
  }

  void ExpectRefused(const NewMessage& message, const std::string& field) {
    try {
      Enqueue(message);
      ADD_FAILURE() << "accepted a bad " << field;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  }

  Store store_;
  Producer producer_;
};

TEST_F(MessageAttributesTest, ProducerWritesEveryAttribute) {
  const std::int64_t now = WallMs();
  NewMessage message = Message("k1");
  message.schema_version = "3.1-beta";
  message.ordering_key = "device-7";
  message.deliver_at = now + 60'000;
  message.expires_at = now + 120'000;
  const Row row = *store_.Get(Enqueue(message));
  EXPECT_EQ(row.schema_version, "3.1-beta");
  EXPECT_EQ(row.ordering_key, "device-7");
  EXPECT_EQ(row.deliver_at, now + 60'000);
  EXPECT_EQ(row.expires_at, now + 120'000);
  EXPECT_EQ(row.next_attempt_at, now + 60'000);  // not due before deliver_at
  EXPECT_FALSE(row.dead_reason);
  EXPECT_FALSE(row.acked_at);
}

TEST_F(MessageAttributesTest, AbsentAttributesStayNull) {
  const Row row = *store_.Get(Enqueue(Message("k1")));
  EXPECT_FALSE(row.schema_version);
  EXPECT_FALSE(row.ordering_key);
  EXPECT_FALSE(row.deliver_at);
  EXPECT_FALSE(row.expires_at);
  EXPECT_LE(row.next_attempt_at, WallMs());
}

TEST_F(MessageAttributesTest, PlainSqlScheduleMakesTheRowDueAtDeliverAt) {
  const std::int64_t at = WallMs() + 3'600'000;
  ASSERT_EQ(PlainSqlError("INSERT INTO outbox(topic, msg_key, payload, deliver_at)"
                          " VALUES('t', 'later', 'p', " + std::to_string(at) + ")"),
            "");
  const Row row = *store_.Get(store_.connection().getLastInsertRowid());
  EXPECT_EQ(row.deliver_at, at);
  EXPECT_EQ(row.next_attempt_at, at);
  // A deliver_at in the past changes nothing: the row is due now.
  ASSERT_EQ(PlainSqlError("INSERT INTO outbox(topic, msg_key, payload, deliver_at)"
                          " VALUES('t', 'past', 'p', 5)"),
            "");
  EXPECT_GT(store_.Get(store_.connection().getLastInsertRowid())->next_attempt_at, 5);
}

TEST_F(MessageAttributesTest, SchedulingMoreThanAYearAheadIsRefused) {
  NewMessage message = Message("far");
  message.deliver_at = WallMs() + kMaxScheduleAheadMs + 60'000;
  ExpectRefused(message, "deliver_at");
  EXPECT_NE(PlainSqlError("INSERT INTO outbox(topic, msg_key, payload, deliver_at) VALUES('t',"
                          " 'far', 'p', " + std::to_string(*message.deliver_at) + ")")
                .find("deliver_at: more than a year ahead"),
            std::string::npos);
}

TEST_F(MessageAttributesTest, SchemaVersionMustBeTokenCharacters) {
  for (const char* bad : {"", "v 2", "v2\r\n", "ü", "a/b"}) {
    NewMessage message = Message(std::string("bad-") + bad);
    message.schema_version = bad;
    ExpectRefused(message, "schema_version");
  }
  NewMessage too_long = Message("long");
  too_long.schema_version = std::string(kMaxSchemaVersionBytes + 1, 'v');
  ExpectRefused(too_long, "schema_version");
  EXPECT_NE(PlainSqlError("INSERT INTO outbox(topic, msg_key, payload, schema_version)"
                          " VALUES('t', 'k', 'p', 'a b')")
                .find("outbox: schema_version"),
            std::string::npos);
  // The column's TEXT affinity makes a number its text, a valid token.
  EXPECT_EQ(PlainSqlError("INSERT INTO outbox(topic, msg_key, payload, schema_version)"
                          " VALUES('t', 'number', 'p', 42)"),
            "");
  NewMessage fine = Message("fine");
  fine.schema_version = "!#$%&'*+-.^_`|~09azAZ";
  EXPECT_EQ(store_.Get(Enqueue(fine))->schema_version, "!#$%&'*+-.^_`|~09azAZ");
}

TEST_F(MessageAttributesTest, OrderingKeyIsBounded) {
  NewMessage empty = Message("empty");
  empty.ordering_key = "";
  ExpectRefused(empty, "ordering_key");
  NewMessage too_long = Message("long");
  too_long.ordering_key = std::string(kMaxKeyBytes + 1, 'k');
  ExpectRefused(too_long, "ordering_key");
  EXPECT_NE(PlainSqlError("INSERT INTO outbox(topic, msg_key, payload, ordering_key)"
                          " VALUES('t', 'k', 'p', '')")
                .find("outbox: ordering_key"),
            std::string::npos);
}

TEST_F(MessageAttributesTest, TimesMustBeIntegersAndReasonsKnown) {
  EXPECT_NE(PlainSqlError("INSERT INTO outbox(topic, msg_key, payload, expires_at)"
                          " VALUES('t', 'k', 'p', 'tomorrow')")
                .find("outbox: expires_at"),
            std::string::npos);
  EXPECT_NE(PlainSqlError("INSERT INTO outbox(topic, msg_key, payload, deliver_at)"
                          " VALUES('t', 'k', 'p', 1.5)")
                .find("outbox: deliver_at"),
            std::string::npos);
  EXPECT_NE(PlainSqlError("INSERT INTO outbox(topic, msg_key, payload, status, dead_reason)"
                          " VALUES('t', 'k', 'p', 2, 'bored')")
                .find("outbox: dead_reason"),
            std::string::npos);
}

TEST_F(MessageAttributesTest, DeadRowsSayWhyAndARetryForgetsIt) {
  const std::int64_t now = WallMs();
  const std::int64_t id = Enqueue(Message("k"));
  const auto claimed = store_.ClaimById(id, "me", now + 60'000, now);
  ASSERT_TRUE(claimed);
  ASSERT_TRUE(store_.MarkDead(claimed->lease, true, "HTTP 422", dead_reason::kPermanent, now));
  EXPECT_EQ(store_.Get(id)->dead_reason, "permanent");
  RowSelector selector;
  selector.id = id;
  ASSERT_EQ(Operator(store_).Retry(selector, {"operator", "host"}, now), 1);
  EXPECT_FALSE(store_.Get(id)->dead_reason);
}

TEST_F(MessageAttributesTest, CrashBudgetDeathsSayCrash) {
  const std::int64_t now = WallMs();
  const std::int64_t id = Enqueue(Message("k"));
  ASSERT_TRUE(store_.ClaimById(id, "dead-agent", now + 60'000, now));
  const Store::TakeBack taken = store_.TakeBackOwner("dead-agent", 1, now);
  ASSERT_EQ(taken.dead_topics.size(), 1u);
  EXPECT_EQ(store_.Get(id)->dead_reason, "crash");
}

}  // namespace
}  // namespace outbox::store
