// The update and delete triggers of schema 7 (store/src/sql.h, kMigration7):
// each job on every path that needs it, plain SQL included, and a store
// completion that runs only the counter.
#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>

#include "../../store/src/sql.h"
#include "outbox/store.h"

namespace outbox::store {
namespace {

constexpr std::int64_t kNow = 1'700'000'000'000;
constexpr std::int64_t kLease = 60'000;

Options Memory() {
  Options options;
  options.path = ":memory:";
  options.create = true;
  return options;
}

class TriggerTest : public ::testing::Test {
 protected:
  TriggerTest() : store_(Memory()) { store_.AgreeOrdering("t", {true, DeadHead::kBlock}, kNow); }

  SQLite::Database& db() { return store_.connection(); }

  // Plain SQL, as another application would write it.
  std::int64_t Insert(const std::string& key) {
    SQLite::Statement q(db(),
                        "INSERT INTO outbox(topic, msg_key, payload, ordering_key, next_attempt_at)"
                        " VALUES('t', ?, 'p', ?, ?)");
    q.bind(1, "m" + std::to_string(++inserted_));
    q.bind(2, key);
    q.bind(3, kNow);
    q.exec();
    return db().getLastInsertRowid();
  }

  Lease Claim(std::int64_t id) {
    auto claimed = store_.ClaimById(id, "me", kNow + kLease, kNow);
    EXPECT_TRUE(claimed) << "row " << id;
    return claimed ? claimed->lease : Lease{};
  }

  // The operator's retry of one dead row (outboxctl's path).
  int RetryDead(std::int64_t id) {
    RowSelector selector;
    selector.id = id;
    return Operator(store_).Retry(selector, {"test", "host"}, kNow);
  }

  void Exec(const std::string& statement, std::int64_t id) {
    db().exec(statement + " WHERE id = " + std::to_string(id));
  }

  std::int64_t Value(const std::string& query, std::int64_t id) {
    SQLite::Statement q(db(), query);
    q.bind(1, id);
    EXPECT_TRUE(q.executeStep()) << query;
    return q.getColumn(0).isNull() ? -1 : q.getColumn(0).getInt64();
  }
  std::int64_t DeliveredAt(std::int64_t id) {
    return Value("SELECT delivered_at FROM outbox WHERE id = ?", id);
  }
  std::int64_t NextAttemptAt(std::int64_t id) {
    return Value("SELECT next_attempt_at FROM outbox WHERE id = ?", id);
  }
  // Whether the row has an entry in outbox_ordering (it waits in its key).
  bool InOrderingIndex(std::int64_t id) {
    return Value("SELECT count(*) FROM outbox INDEXED BY outbox_ordering"
                 " WHERE topic = 't' AND ordering_key IS NOT NULL AND delivered_at IS NULL"
                 "   AND id = ?",
                 id) == 1;
  }

  // The undelivered count max_pending checks (the counter and the rows
  // above its mark) against the rows it counts.
  void ExpectCounter(std::int64_t expected) {
    SQLite::Statement q(db(), std::string("SELECT (") + sql::kUndelivered +
                                  "), (SELECT count(*) FROM outbox WHERE status <> 1)");
    ASSERT_TRUE(q.executeStep());
    EXPECT_EQ(q.getColumn(0).getInt64(), expected);
    EXPECT_EQ(q.getColumn(1).getInt64(), expected);
  }

  int inserted_ = 0;
  Store store_;
};

TEST_F(TriggerTest, TheUndeliveredCounterFollowsEveryPath) {
  const auto a1 = Insert("a");
  const auto b1 = Insert("b");
  const auto c1 = Insert("c");
  ExpectCounter(3);
  const Lease lease = Claim(a1);
  ExpectCounter(3);  // in flight is undelivered
  ASSERT_TRUE(store_.Complete(lease, kNow));
  ExpectCounter(2);
  const std::int64_t ids[] = {a1};
  ASSERT_EQ(Operator(store_).Requeue(ids, {"test", "host"}, "requeue", kNow), 1);
  ExpectCounter(3);
  ASSERT_TRUE(store_.Reschedule(Claim(b1), true, kNow, "x", kNow));
  ExpectCounter(3);
  // Plain SQL: into and out of delivered, from pending and from dead.
  Exec("UPDATE outbox SET status = 1", b1);
  ExpectCounter(2);
  Exec("UPDATE outbox SET status = 2, dead_reason = 'permanent'", b1);
  ExpectCounter(3);
  Exec("UPDATE outbox SET status = 1", b1);
  ExpectCounter(2);
  Exec("UPDATE outbox SET status = 0", c1);  // 0 -> 0: no transition
  ExpectCounter(2);
  Exec("DELETE FROM outbox", b1);  // delivered: not counted
  ExpectCounter(2);
  Exec("DELETE FROM outbox", c1);
  ExpectCounter(1);
}

// delivered_at is set exactly on delivered rows, whoever writes status: a
// keyed row leaves outbox_ordering when delivered and is back in it when it
// comes back, which the ordering check depends on.
TEST_F(TriggerTest, PlainSqlStatusWritesSetAndClearDeliveredAt) {
  const auto a1 = Insert("a");
  const auto a2 = Insert("a");
  EXPECT_TRUE(InOrderingIndex(a1));
  Exec("UPDATE outbox SET status = 1, updated_at = 7", a1);
  EXPECT_EQ(DeliveredAt(a1), 7);
  EXPECT_FALSE(InOrderingIndex(a1));
  EXPECT_TRUE(store_.ClaimById(a2, "me", kNow + kLease, kNow));  // the key goes on
  Exec("UPDATE outbox SET status = 0", a1);
  EXPECT_EQ(DeliveredAt(a1), -1);
  EXPECT_TRUE(InOrderingIndex(a1));
  // Dead is not delivered either, nor is a dead row marked delivered by hand
  // left out of the index it has just left.
  Exec("UPDATE outbox SET status = 2, dead_reason = 'permanent'", a1);
  EXPECT_EQ(DeliveredAt(a1), -1);
  Exec("UPDATE outbox SET status = 1, updated_at = 9", a1);
  EXPECT_EQ(DeliveredAt(a1), 9);
  EXPECT_FALSE(InOrderingIndex(a1));
}

// A write of delivered_at alone cannot disagree with status: an undelivered
// keyed row taken out of outbox_ordering would no longer hold its key.
TEST_F(TriggerTest, PlainSqlWritesOfDeliveredAtAloneArePutRight) {
  const auto a1 = Insert("a");
  const auto a2 = Insert("a");
  Exec("UPDATE outbox SET delivered_at = 5", a1);
  EXPECT_EQ(DeliveredAt(a1), -1);
  EXPECT_TRUE(InOrderingIndex(a1));
  EXPECT_FALSE(store_.ClaimById(a2, "me", kNow + kLease, kNow));  // a1 still holds key a
  ASSERT_TRUE(store_.Complete(Claim(a1), kNow + 3));
  Exec("UPDATE outbox SET delivered_at = NULL, updated_at = 8", a1);
  EXPECT_EQ(DeliveredAt(a1), 8);
  EXPECT_FALSE(InOrderingIndex(a1));
  // The store's own statements set it themselves.
  ASSERT_TRUE(store_.Complete(Claim(a2), kNow + 4));
  EXPECT_EQ(DeliveredAt(a2), kNow + 4);
}

// a1 dead (permanent) under "block" with a2, a3 parked behind it; b1, b2
// of another key.
class UnparkTest : public TriggerTest {
 protected:
  void SetUp() override {
    a1_ = Insert("a");
    a2_ = Insert("a");
    a3_ = Insert("a");
    b1_ = Insert("b");
    b2_ = Insert("b");
    ASSERT_TRUE(store_.MarkDead(Claim(a1_), true, "x", "permanent", kNow));
    ASSERT_EQ(store_.ParkBehindDeadHeads("t", kNow), 2);
  }
  bool Parked() {
    const bool a2 = NextAttemptAt(a2_) == kParkedAt;
    EXPECT_EQ(NextAttemptAt(a3_) == kParkedAt, a2);
    return a2;
  }
  std::int64_t a1_ = 0, a2_ = 0, a3_ = 0, b1_ = 0, b2_ = 0;
};

TEST_F(UnparkTest, OtherRowsComingAndGoingLeaveThemParked) {
  ASSERT_TRUE(store_.Complete(Claim(b1_), kNow));
  ASSERT_TRUE(store_.Reschedule(Claim(b2_), true, kNow, "x", kNow));
  ASSERT_TRUE(store_.MarkDead(Claim(b2_), true, "x", "permanent", kNow));
  ASSERT_EQ(RetryDead(b2_), 1);
  Exec("DELETE FROM outbox", b2_);
  // The dead head itself, rewritten but still blocking.
  Exec("UPDATE outbox SET status = 2, dead_reason = 'attempts'", a1_);
  EXPECT_TRUE(Parked());
}

TEST_F(UnparkTest, RetryingTheDeadHeadUnparks) {
  ASSERT_EQ(RetryDead(a1_), 1);
  EXPECT_FALSE(Parked());
  EXPECT_EQ(NextAttemptAt(a2_), kNow);  // due since it was parked
}

TEST_F(UnparkTest, CancellingTheDeadHeadUnparks) {
  RowSelector selector;
  selector.id = a1_;
  ASSERT_EQ(Operator(store_).Cancel(selector, {"test", "host"}, kNow), 1);
  EXPECT_FALSE(Parked());
}

// Dead stays dead; the reason changes to one that never blocks.
TEST_F(UnparkTest, ThePlainSqlExpiryOfTheDeadHeadUnparks) {
  Exec("UPDATE outbox SET dead_reason = 'expired'", a1_);
  EXPECT_FALSE(Parked());
}

TEST_F(UnparkTest, APlainSqlDeleteOfTheDeadHeadUnparks) {
  Exec("DELETE FROM outbox", a1_);
  EXPECT_FALSE(Parked());
}

TEST_F(UnparkTest, APlainSqlRetryOfTheDeadHeadUnparks) {
  Exec("UPDATE outbox SET status = 0, dead_reason = NULL", a1_);
  EXPECT_FALSE(Parked());
}

// The steps a completion by the store runs (kComplete, as Store::Complete
// binds it), counted by SQLite.
int CompletionSteps(SQLite::Database& db, const Lease& lease, std::int64_t now) {
  sqlite3_stmt* q = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db.getHandle(), sql::kComplete, -1, &q, nullptr), SQLITE_OK);
  sqlite3_bind_int64(q, 1, lease.id);
  sqlite3_bind_int64(q, 2, lease.token);
  sqlite3_bind_int64(q, 3, now);
  EXPECT_EQ(sqlite3_step(q), SQLITE_DONE);
  EXPECT_EQ(sqlite3_changes(db.getHandle()), 1);
  const int steps = sqlite3_stmt_status(q, SQLITE_STMTSTATUS_VM_STEP, 0);
  sqlite3_finalize(q);
  return steps;
}

// The point of schema 7: a store completion runs the counter's statement
// and stops at the WHEN of the delivered_at and unpark triggers. A trigger
// that stops at its WHEN costs the same steps whatever its body, so each is
// replaced in turn by a twin with its own header and an empty body: the
// same rows completed the same way must take the same steps. Were a WHEN
// true for a completion, its statement would run (opening its cursors even
// if its own WHERE then found nothing) and the counts would differ.
TEST_F(TriggerTest, AStoreCompletionStopsAtTheWhenOfEveryTriggerButTheCounter) {
  const auto Twin = [&](const char* name) {
    SQLite::Statement q(db(), "SELECT sql FROM sqlite_schema WHERE type = 'trigger' AND name = ?");
    q.bind(1, name);
    ASSERT_TRUE(q.executeStep()) << name;
    const std::string text = q.getColumn(0).getString();
    const std::size_t begin = text.find("\nBEGIN");
    ASSERT_NE(begin, std::string::npos) << text;
    q.reset();
    db().exec(std::string("DROP TRIGGER ") + name);
    db().exec(text.substr(0, begin) + "\nBEGIN SELECT 1; END");
  };
  // Rows alike: one row of its own key each, completed at the same time.
  const auto a = Insert("a");
  const auto b = Insert("b");
  const auto c = Insert("c");
  const int steps = CompletionSteps(db(), Claim(a), kNow);
  Twin("outbox_delivered_at");
  EXPECT_EQ(CompletionSteps(db(), Claim(b), kNow), steps) << "outbox_delivered_at";
  Twin("outbox_unpark_update");
  EXPECT_EQ(CompletionSteps(db(), Claim(c), kNow), steps) << "outbox_unpark_update";
  ExpectCounter(0);
  EXPECT_EQ(DeliveredAt(c), kNow);
}

}  // namespace
}  // namespace outbox::store
