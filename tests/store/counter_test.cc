// The undelivered count of schema 8 (store/src/sql.h, kMigration8): a
// counter for the rows up to a mark and a count of the few rows above it, so
// that an insert writes no counter page; exact on every path, and
// max_pending refuses at exactly its number.
#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include <string>

#include "outbox/store.h"

namespace outbox::store {
namespace {

Options Memory() {
  Options options;
  options.path = ":memory:";
  options.create = true;
  return options;
}

class CounterTest : public ::testing::Test {
 protected:
  CounterTest() : store_(Memory()) {}

  SQLite::Database& db() { return store_.connection(); }

  void Insert(int n) {
    SQLite::Statement q(db(), "INSERT INTO outbox(topic, msg_key, payload) VALUES('t', ?, 'p')");
    for (int i = 0; i < n; ++i) {
      q.bind(1, "k" + std::to_string(++keys_));
      q.exec();
      q.reset();
    }
  }

  std::int64_t Scalar(const std::string& query) { return db().execAndGet(query).getInt64(); }

  // Exact, and the capacity test's premise: every id above the mark is
  // below upto + 64, so the trigger counts at most 63 rows there.
  void ExpectExact(const std::string& when) {
    EXPECT_EQ(store_.GetStats().undelivered,
              Scalar("SELECT count(*) FROM outbox WHERE status <> 1"))
        << when;
    EXPECT_EQ(Scalar("SELECT count(*) FROM outbox, outbox_counters"
                     " WHERE name = 'undelivered' AND id >= upto + 64"),
              0)
        << when;
  }

  // The counter rows as they are in the file.
  std::string CounterRows() {
    SQLite::Statement q(db(), "SELECT name, value, coalesce(upto, 'NULL') FROM outbox_counters");
    std::string rows;
    while (q.executeStep()) {
      rows += q.getColumn(0).getString() + "=" + q.getColumn(1).getString() + "/" +
              q.getColumn(2).getString() + " ";
    }
    return rows;
  }

  Store store_;
  int keys_ = 0;
};

TEST_F(CounterTest, TheCountIsExactBelowAndAboveTheMarkOnEveryPath) {
  Insert(150);  // two folds: the mark is well inside the rows
  EXPECT_GT(Scalar("SELECT upto FROM outbox_counters WHERE name = 'undelivered'"), 64);
  ExpectExact("inserted");
  db().exec("UPDATE outbox SET status = 1 WHERE id IN (3, 140, 149)");  // below and above
  ExpectExact("delivered by plain SQL");
  db().exec("UPDATE outbox SET status = 0 WHERE id IN (3, 149)");
  ExpectExact("requeued");
  db().exec("DELETE FROM outbox WHERE id IN (4, 5, 148)");
  ExpectExact("deleted");
  db().exec("INSERT INTO outbox(id, topic, msg_key, payload) VALUES(4, 't', 'again', 'p')");
  db().exec("INSERT INTO outbox(id, topic, msg_key, payload, status) VALUES(5, 't', 'd', 'p', 1)");
  ExpectExact("an explicit id below the mark");
  db().exec("UPDATE outbox SET id = 1000 WHERE id = 10");
  db().exec("UPDATE outbox SET id = 10 WHERE id = 149");
  ExpectExact("ids moved across the mark");
  Insert(100);
  ExpectExact("inserted after an id far above");
  constexpr std::int64_t kLater = 4'000'000'000'000;  // every row is due
  for (const auto& claimed : store_.ClaimDue("t", "me", kLater + 60'000, kLater, 500)) {
    store_.Complete(claimed.lease, 5);
  }
  EXPECT_EQ(store_.GetStats().undelivered, 0);
  ExpectExact("delivered by the store");
}

TEST_F(CounterTest, MaxPendingRefusesAtExactlyItsNumber) {
  store_.SetLimits({0, 100, 0});
  Insert(100);
  EXPECT_THROW(Insert(1), SQLite::Exception);
  db().exec("UPDATE outbox SET status = 1 WHERE id = 100");  // above the mark
  Insert(1);
  EXPECT_THROW(Insert(1), SQLite::Exception);
  db().exec("UPDATE outbox SET status = 1 WHERE id = 1");  // below it
  Insert(1);
  EXPECT_THROW(Insert(1), SQLite::Exception);
}

// A limit far above the rows above the mark: the insert trigger skips the
// count until the counter is within 63 of it, then counts exactly.
TEST_F(CounterTest, ALargeMaxPendingRefusesAtExactlyItsNumber) {
  store_.SetLimits({0, 1000, 0});
  Insert(1000);  // the last rows above the mark
  ExpectExact("at the limit");
  EXPECT_THROW(Insert(1), SQLite::Exception);
  db().exec("UPDATE outbox SET status = 1 WHERE id = 5");
  db().exec("INSERT INTO outbox(id, topic, msg_key, payload) VALUES(5000, 't', 'far', 'p')");
  ExpectExact("an explicit id far above");
  EXPECT_THROW(Insert(1), SQLite::Exception);
  db().exec("UPDATE outbox SET status = 1 WHERE id = 5000");
  Insert(1);
  EXPECT_THROW(Insert(1), SQLite::Exception);
}

TEST_F(CounterTest, WithoutMaxPendingAnInsertWritesNoCounter) {
  store_.SetLimits({0, 0, 0});
  const std::string before = CounterRows();
  Insert(300);
  EXPECT_EQ(CounterRows(), before);
  ExpectExact("without a limit");
  // Set later, the limit holds at once.
  store_.SetLimits({0, 300, 0});
  EXPECT_THROW(Insert(1), SQLite::Exception);
  db().exec("UPDATE outbox SET status = 1 WHERE id = 7");
  Insert(1);
  ExpectExact("after the limit was set");
}

// Plain SQL's payload goes into the outbox row, then to outbox_payload: the
// copy takes the overflow pages the row gave up, so none are left free.
TEST_F(CounterTest, APlainSqlPayloadReusesThePagesItsRowGaveUp) {
  store_.SetLimits({0, 0, 0});
  SQLite::Statement q(db(), "INSERT INTO outbox(topic, msg_key, payload) VALUES('t', ?, ?)");
  const std::string payload(20'000, 'x');
  for (int i = 0; i < 5; ++i) {
    q.bind(1, "k" + std::to_string(i));
    q.bind(2, payload.data(), static_cast<int>(payload.size()));
    q.exec();
    q.reset();
  }
  EXPECT_EQ(Scalar("PRAGMA freelist_count"), 0);
  EXPECT_EQ(Scalar("SELECT sum(length(payload)) FROM outbox_message"), 100'000);
  EXPECT_EQ(Scalar("SELECT sum(length(payload)) FROM outbox"), 0);
}

}  // namespace
}  // namespace outbox::store
