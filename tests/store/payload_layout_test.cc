// The payload layout (schema 5): outbox keeps the state, outbox_payload the
// payload and headers, and every statement of the plain-SQL contract still
// behaves as it did on one table.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Transaction.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "../common/temp_dir.h"
#include "outbox/store.h"

namespace outbox::store {
namespace {

using outbox::testing::TempDir;

constexpr std::int64_t kNow = 1'700'000'000'000;

Options Memory() {
  Options options;
  options.path = ":memory:";
  options.create = true;
  return options;
}

std::int64_t Scalar(SQLite::Database& db, const std::string& query) {
  SQLite::Statement q(db, query);
  EXPECT_TRUE(q.executeStep()) << query;
  return q.getColumn(0).getInt64();
}

std::string Text(SQLite::Database& db, const std::string& query) {
  SQLite::Statement q(db, query);
  EXPECT_TRUE(q.executeStep()) << query;
  return q.getColumn(0).getString();
}

class PayloadLayout : public ::testing::Test {
 protected:
  Store store_{Memory()};
  SQLite::Database& db_ = store_.connection();
};

TEST_F(PayloadLayout, PlainInsertMovesPayloadAndHeadersToTheSideTable) {
  db_.exec(
      "INSERT INTO outbox(topic, msg_key, payload, headers)"
      " VALUES('t', 'k', 'hello', '{\"X-A\":\"1\"}')");
  EXPECT_EQ(Scalar(db_, "SELECT length(payload) FROM outbox WHERE msg_key = 'k'"), 0);
  EXPECT_EQ(Scalar(db_, "SELECT headers IS NULL FROM outbox WHERE msg_key = 'k'"), 1);
  EXPECT_EQ(Text(db_, "SELECT payload FROM outbox_payload"), "hello");
  EXPECT_EQ(Text(db_, "SELECT payload FROM outbox_message WHERE msg_key = 'k'"), "hello");
  EXPECT_EQ(Text(db_, "SELECT headers FROM outbox_message WHERE msg_key = 'k'"),
            "{\"X-A\":\"1\"}");
  const Row row = *store_.Get(1);
  EXPECT_EQ(row.payload, "hello");
  EXPECT_EQ(row.headers_json, "{\"X-A\":\"1\"}");
}

TEST_F(PayloadLayout, InsertOrIgnoreOfADuplicateInsertsAndMovesNothing) {
  db_.exec("INSERT INTO outbox(topic, msg_key, payload) VALUES('t', 'k', 'first')");
  db_.exec("INSERT OR IGNORE INTO outbox(topic, msg_key, payload) VALUES('t', 'k', 'second')");
  EXPECT_EQ(Scalar(db_, "SELECT changes()"), 0);
  EXPECT_EQ(Scalar(db_, "SELECT count(*) FROM outbox_payload"), 1);
  EXPECT_EQ(Text(db_, "SELECT payload FROM outbox_message"), "first");
}

TEST_F(PayloadLayout, OnConflictDoNothingInsertsAndMovesNothing) {
  db_.exec("INSERT INTO outbox(topic, msg_key, payload) VALUES('t', 'k', 'first')");
  db_.exec(
      "INSERT INTO outbox(topic, msg_key, payload) VALUES('t', 'k', 'second')"
      " ON CONFLICT(topic, msg_key) DO NOTHING");
  EXPECT_EQ(Scalar(db_, "SELECT changes()"), 0);
  EXPECT_EQ(Scalar(db_, "SELECT count(*) FROM outbox_payload"), 1);
  EXPECT_EQ(Text(db_, "SELECT payload FROM outbox_message"), "first");
  // And the upsert form inserts when there is no conflict.
  db_.exec(
      "INSERT INTO outbox(topic, msg_key, payload) VALUES('t', 'k2', 'other')"
      " ON CONFLICT(topic, msg_key) DO NOTHING");
  EXPECT_EQ(Scalar(db_, "SELECT changes()"), 1);
  EXPECT_EQ(Text(db_, "SELECT payload FROM outbox_message WHERE msg_key = 'k2'"), "other");
}

TEST_F(PayloadLayout, LastInsertRowidAndReturningNameTheOutboxRow) {
  // An application table with a far-off rowid: a layout that made outbox a
  // view would leave last_insert_rowid() at 1000.
  db_.exec("CREATE TABLE orders(id INTEGER PRIMARY KEY)");
  db_.exec("INSERT INTO orders(id) VALUES(1000)");
  db_.exec("INSERT INTO outbox(topic, msg_key, payload) VALUES('t', 'a', 'x')");
  const std::int64_t first = Scalar(db_, "SELECT id FROM outbox WHERE msg_key = 'a'");
  EXPECT_EQ(Scalar(db_, "SELECT last_insert_rowid()"), first);
  db_.exec("INSERT INTO orders(id) VALUES(2000)");
  SQLite::Statement returning(
      db_, "INSERT INTO outbox(topic, msg_key, payload) VALUES('t', 'b', 'y') RETURNING id");
  ASSERT_TRUE(returning.executeStep());
  ASSERT_FALSE(returning.getColumn(0).isNull());
  const std::int64_t second = returning.getColumn(0).getInt64();
  while (returning.executeStep()) {
  }
  EXPECT_EQ(second, Scalar(db_, "SELECT id FROM outbox WHERE msg_key = 'b'"));
  EXPECT_NE(second, 2000);
  EXPECT_EQ(Text(db_, "SELECT payload FROM outbox_message WHERE id = " + std::to_string(second)),
            "y");
}

TEST_F(PayloadLayout, LimitAndFieldChecksStillFireForPlainSql) {
  store_.SetLimits({/*max_payload_bytes=*/4, /*max_pending=*/2, /*max_db_bytes=*/0});
  try {
    db_.exec("INSERT INTO outbox(topic, msg_key, payload) VALUES('t', 'big', 'hello')");
    FAIL() << "expected the payload limit";
  } catch (const SQLite::Exception& e) {
    EXPECT_NE(std::string(e.what()).find("outbox: payload:"), std::string::npos) << e.what();
  }
  try {
    db_.exec("INSERT INTO outbox(topic, msg_key, payload, headers) VALUES('t', 'h', 'x', '[1]')");
    FAIL() << "expected the headers check";
  } catch (const SQLite::Exception& e) {
    EXPECT_NE(std::string(e.what()).find("outbox: headers:"), std::string::npos) << e.what();
  }
  try {
    db_.exec("INSERT INTO outbox(topic, msg_key, payload) VALUES('', 'k', 'x')");
    FAIL() << "expected the topic check";
  } catch (const SQLite::Exception& e) {
    EXPECT_NE(std::string(e.what()).find("outbox: topic:"), std::string::npos) << e.what();
  }
  // Nothing of the refused inserts is left in either table, or counted.
  EXPECT_EQ(Scalar(db_, "SELECT count(*) FROM outbox"), 0);
  EXPECT_EQ(Scalar(db_, "SELECT count(*) FROM outbox_payload"), 0);
  EXPECT_EQ(store_.GetStats().undelivered, 0);
  db_.exec("INSERT INTO outbox(topic, msg_key, payload) VALUES('t', 'a', 'x'), ('t', 'b', 'y')");
  try {
    db_.exec("INSERT INTO outbox(topic, msg_key, payload) VALUES('t', 'c', 'z')");
    FAIL() << "expected max_pending";
  } catch (const SQLite::Exception& e) {
    EXPECT_NE(std::string(e.what()).find("outbox: capacity:"), std::string::npos) << e.what();
  }
}

TEST_F(PayloadLayout, ProducerRefusalLeavesTheTransactionAsItWas) {
  store_.SetLimits({/*max_payload_bytes=*/4, /*max_pending=*/100, /*max_db_bytes=*/0});
  Producer producer(db_);
  SQLite::Transaction txn(db_, SQLite::TransactionBehavior::IMMEDIATE);
  producer.Enqueue({"t", "ok", "tiny", "", {}});
  EXPECT_THROW(producer.Enqueue({"t", "big", "too large", "", {}}), std::invalid_argument);
  EXPECT_THROW(producer.Enqueue({"t", "hdr", "x", "[1]", {}}), std::invalid_argument);
  txn.commit();
  EXPECT_EQ(Scalar(db_, "SELECT count(*) FROM outbox"), 1);
  EXPECT_EQ(Scalar(db_, "SELECT count(*) FROM outbox_payload"), 1);
  EXPECT_EQ(store_.GetStats().undelivered, 1);
  EXPECT_EQ(store_.Get(1)->payload, "tiny");
}

// outbox_payload has no trigger: the Producer checks the payload limit in
// its state row's INSERT. The caller still hears the payload before the
// capacity, and both limits still hold for it and for plain SQL.
TEST_F(PayloadLayout, ProducerHearsThePayloadLimitBeforeCapacity) {
  store_.SetLimits({/*max_payload_bytes=*/4, /*max_pending=*/1, /*max_db_bytes=*/0});
  Producer producer(db_);
  EnqueueOptions standalone;
  standalone.standalone = true;
  ASSERT_TRUE(producer.Enqueue({"t", "a", "x", "", {}}, standalone).inserted);
  try {
    producer.Enqueue({"t", "big", "too large", "", {}}, standalone);
    FAIL() << "expected the payload limit";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("max_payload_bytes"), std::string::npos) << e.what();
  }
  EXPECT_THROW(producer.Enqueue({"t", "b", "y", "", {}}, standalone), CapacityError);
  try {
    db_.exec("INSERT INTO outbox(topic, msg_key, payload) VALUES('t', 'big', 'too large')");
    FAIL() << "expected the payload limit";
  } catch (const SQLite::Exception& e) {
    EXPECT_NE(std::string(e.what()).find("outbox: payload:"), std::string::npos) << e.what();
  }
  store_.SetLimits({/*max_payload_bytes=*/0, /*max_pending=*/0, /*max_db_bytes=*/1});
  EXPECT_THROW(producer.Enqueue({"t", "c", "y", "", {}}, standalone), CapacityError);
  try {
    db_.exec("INSERT INTO outbox(topic, msg_key, payload) VALUES('t', 'c', 'y')");
    FAIL() << "expected max_db_bytes";
  } catch (const SQLite::Exception& e) {
    EXPECT_NE(std::string(e.what()).find("max_db_bytes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(Scalar(db_, "SELECT count(*) FROM outbox"), 1);
  EXPECT_EQ(Scalar(db_, "SELECT count(*) FROM outbox_payload"), 1);
  // No limits: a payload of any size goes in whole.
  store_.SetLimits({0, 0, 0});
  const std::string large(100000, 'p');
  const EnqueueResult result = producer.Enqueue({"t", "large", large, "", {}}, standalone);
  EXPECT_EQ(store_.Get(result.id)->payload, large);
}

TEST_F(PayloadLayout, ProducerWritesBothTablesAndLeavesTheTriggerNothing) {
  Producer producer(db_);
  const EnqueueResult result =
      producer.Enqueue({"t", "k", std::string("a\0b", 3), "{\"X-A\":\"1\"}", {}}, {true, false});
  EXPECT_EQ(Scalar(db_, "SELECT length(payload) FROM outbox"), 0);
  EXPECT_EQ(Scalar(db_, "SELECT id FROM outbox_payload"), result.id);
  const Row row = *store_.Get(result.id);
  EXPECT_EQ(row.payload, std::string("a\0b", 3));
  EXPECT_EQ(row.headers_json, "{\"X-A\":\"1\"}");
}

TEST_F(PayloadLayout, StateColumnsAreReadableFromOutbox) {
  db_.exec("INSERT INTO outbox(topic, msg_key, payload) VALUES('t', 'k', 'x')");
  auto claimed = store_.ClaimById(1, "me", kNow + 60'000, kNow);
  ASSERT_TRUE(claimed);
  ASSERT_TRUE(store_.Reschedule(claimed->lease, true, kNow + 5'000, "HTTP 503", kNow));
  SQLite::Statement q(db_,
                      "SELECT status, attempts, next_attempt_at, last_error, created_at,"
                      " updated_at FROM outbox WHERE id = 1");
  ASSERT_TRUE(q.executeStep());
  EXPECT_EQ(q.getColumn(0).getInt(), 0);
  EXPECT_EQ(q.getColumn(1).getInt(), 1);
  EXPECT_EQ(q.getColumn(2).getInt64(), kNow + 5'000);
  EXPECT_EQ(q.getColumn(3).getString(), "HTTP 503");
  EXPECT_GT(q.getColumn(4).getInt64(), 0);
  EXPECT_EQ(q.getColumn(5).getInt64(), kNow);
}

TEST_F(PayloadLayout, ClaimsReturnTheRowWithItsPayload) {
  db_.exec(
      "INSERT INTO outbox(topic, msg_key, payload, headers, next_attempt_at)"
      " VALUES('t', 'a', 'one', '{\"X-A\":\"1\"}', 0), ('t', 'b', 'two', NULL, 0),"
      " ('t', 'c', '', NULL, 0)");
  const std::vector<Claimed> claimed = store_.ClaimDue("t", "me", kNow + 60'000, kNow, 10);
  ASSERT_EQ(claimed.size(), 3u);
  EXPECT_EQ(claimed[0].row.payload, "one");
  EXPECT_EQ(claimed[0].row.headers_json, "{\"X-A\":\"1\"}");
  EXPECT_EQ(claimed[1].row.payload, "two");
  EXPECT_FALSE(claimed[1].row.headers_json);
  EXPECT_EQ(claimed[2].row.payload, "");  // nothing to move: read from outbox
  for (const Claimed& c : claimed) {
    EXPECT_EQ(c.row.status, Status::kInFlight);
    EXPECT_EQ(c.row.lease_token, c.lease.token);
    EXPECT_EQ(c.row.lease_owner, "me");
    EXPECT_EQ(c.row.key, std::string(1, static_cast<char>('a' + (c.lease.id - 1))));
  }
  db_.exec("INSERT INTO outbox(topic, msg_key, payload) VALUES('t', 'd', 'four')");
  auto one = store_.ClaimById(4, "me", kNow + 60'000, kNow);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->row.payload, "four");
  EXPECT_EQ(one->lease.token, one->row.lease_token);
}

TEST_F(PayloadLayout, PurgesAndPlainDeletesTakeThePayloadAlong) {
  db_.exec(
      "INSERT INTO outbox(topic, msg_key, payload, status, updated_at)"
      " VALUES('t', 'delivered', 'd', 1, 5), ('t', 'dead', 'x', 2, 5),"
      " ('t', 'app', 'y', 0, 5), ('t', 'kept', 'z', 0, 5)");
  ASSERT_EQ(Scalar(db_, "SELECT count(*) FROM outbox_payload"), 4);
  EXPECT_EQ(store_.PurgeDelivered(kNow, 10), 1);
  RowSelector all;
  all.all = true;
  EXPECT_EQ(Operator(store_).PurgeDeadBatch(all, 10), 1);
  db_.exec("DELETE FROM outbox WHERE msg_key = 'app'");
  EXPECT_EQ(Scalar(db_, "SELECT count(*) FROM outbox_payload"), 1);
  EXPECT_EQ(Text(db_, "SELECT payload FROM outbox_message"), "z");
}

// The point of the layout: a delivery writes state, not the payload again.
TEST(PayloadLayoutFile, ClaimAndCompleteDoNotRewriteThePayload) {
  TempDir dir;
  Options options;
  options.path = dir.File("app.db");
  options.create = true;
  Store store(options);
  Producer producer(store.connection());
  const std::string payload(256 * 1024, 'p');
  producer.Enqueue({"t", "k", payload, "", {}}, {true, false});
  store.Checkpoint();
  // The Producer's row is due at the wall clock's now.
  const std::int64_t now = kNow * 2;
  const auto claimed = store.ClaimDue("t", "me", now + 60'000, now, 1);
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].row.payload.size(), payload.size());
  ASSERT_TRUE(store.Complete(claimed[0].lease, now));
  struct stat wal {};
  ASSERT_EQ(::stat((options.path + "-wal").c_str(), &wal), 0);
  // Two commits of a few pages each; the payload alone is 64 pages.
  EXPECT_LT(wal.st_size, 16 * 4096) << "claim + complete wrote " << wal.st_size << " bytes";
}

}  // namespace
}  // namespace outbox::store
