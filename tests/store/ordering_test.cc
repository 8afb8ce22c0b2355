// Per-key ordering in the claim statements (docs/ordering.md).
#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "../common/temp_dir.h"
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

class OrderingTest : public ::testing::Test {
 protected:
  OrderingTest() : store_(Memory()) { Order("t", DeadHead::kBlock); }

  void Order(const std::string& topic, DeadHead dead_head) {
    store_.AgreeOrdering(topic, {true, dead_head}, kNow);
  }

  // Plain SQL, as another application would write it.
  std::int64_t Insert(const std::string& topic, const std::optional<std::string>& ordering_key,
                      std::int64_t due = kNow) {
    SQLite::Statement q(store_.connection(),
                        "INSERT INTO outbox(topic, msg_key, payload, ordering_key,"
                        " next_attempt_at) VALUES(?, ?, 'p', ?, ?)");
    q.bind(1, topic);
    q.bind(2, "m" + std::to_string(++inserted_));
    if (ordering_key) {
      q.bind(3, *ordering_key);
    } else {
      q.bind(3);
    }
    q.bind(4, due);
    q.exec();
    return store_.connection().getLastInsertRowid();
  }

  std::vector<std::int64_t> ClaimIds(const std::string& topic, int limit = 100) {
    std::vector<std::int64_t> ids;
    for (const auto& c : store_.ClaimDue(topic, "me", kNow + kLease, kNow, limit)) {
      ids.push_back(c.lease.id);
    }
    return ids;
  }

  Lease Claim(std::int64_t id) {
    auto claimed = store_.ClaimById(id, "me", kNow + kLease, kNow);
    EXPECT_TRUE(claimed) << "row " << id;
    return claimed ? claimed->lease : Lease{};
  }

  void Dead(std::int64_t id, const char* reason) {
    ASSERT_TRUE(store_.MarkDead(Claim(id), true, "x", reason, kNow));
  }

  // The operator's retry and purge of one dead row (outboxctl's path).
  int RetryDead(std::int64_t id) {
    RowSelector selector;
    selector.id = id;
    return Operator(store_).Retry(selector, {"test", "host"}, kNow);
  }
  int PurgeDead(std::int64_t id) {
    RowSelector selector;
    selector.id = id;
    return Operator(store_).PurgeDeadBatch(selector, 10);
  }

  int inserted_ = 0;
  Store store_;
};

TEST_F(OrderingTest, ClaimTakesOnlyTheOldestUndeliveredRowOfEachKey) {
  const auto a1 = Insert("t", "a");
  const auto b1 = Insert("t", "b");
  Insert("t", "a");
  const auto none1 = Insert("t", std::nullopt);
  const auto none2 = Insert("t", std::nullopt);
  Insert("t", "b");
  EXPECT_EQ(ClaimIds("t"), (std::vector<std::int64_t>{a1, b1, none1, none2}));
  // Everything left waits for a row in flight.
  EXPECT_TRUE(ClaimIds("t").empty());
  EXPECT_FALSE(store_.HasDue("t", kNow));
}

TEST_F(OrderingTest, CompletionLetsTheNextRowOfTheKeyGoAndNothingElse) {
  const auto a1 = Insert("t", "a");
  const auto a2 = Insert("t", "a");
  const auto a3 = Insert("t", "a");
  const Lease lease = Claim(a1);
  EXPECT_FALSE(store_.ClaimById(a2, "me", kNow + kLease, kNow));
  EXPECT_FALSE(store_.ClaimNextOfKey("t", "a", "me", kNow + kLease, kNow));
  ASSERT_TRUE(store_.Complete(lease, kNow));
  EXPECT_FALSE(store_.ClaimById(a3, "me", kNow + kLease, kNow));
  const auto next = store_.ClaimNextOfKey("t", "a", "me", kNow + kLease, kNow);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->lease.id, a2);
  EXPECT_EQ(next->topic, "t");
}

// The writer claims the next rows of every key completed in a transaction
// at once: each key's next row that may go, none that may not, in id order,
// across the statements' 32-key chunks.
TEST_F(OrderingTest, ClaimNextOfKeysTakesEachKeysNextRowThatMayGo) {
  std::vector<std::string> keys;
  std::vector<std::int64_t> expected;
  for (int k = 0; k < 40; ++k) {
    const std::string key = "k" + std::to_string(k);
    ASSERT_TRUE(store_.Complete(Claim(Insert("t", key)), kNow));
    expected.push_back(Insert("t", key));
    Insert("t", key);
    keys.push_back(key);
  }
  const auto held = Insert("t", "held");  // its head is in flight
  Insert("t", "held");
  Claim(held);
  const auto later = Insert("t", "later", kNow + 1);  // not due yet
  keys.insert(keys.begin() + 5, {"held", "later", "k3", "nothing"});
  std::vector<std::int64_t> ids;
  for (const auto& c : store_.ClaimNextOfKeys("t", keys, "me", kNow + kLease, kNow)) {
    EXPECT_EQ(c.topic, "t");
    ids.push_back(c.lease.id);
  }
  EXPECT_EQ(ids, expected);
  EXPECT_TRUE(store_.ClaimNextOfKeys("t", keys, "me", kNow + kLease, kNow).empty());
  EXPECT_EQ(store_.Get(later)->status, Status::kPending);
}

TEST_F(OrderingTest, UnorderedTopicsAndRowsWithoutKeyGoInParallel) {
  const auto u1 = Insert("u", "a");
  const auto u2 = Insert("u", "a");
  EXPECT_EQ(ClaimIds("u"), (std::vector<std::int64_t>{u1, u2}));
}

TEST_F(OrderingTest, AFailedHeadWaitingForItsRetryHoldsItsKey) {
  const auto a1 = Insert("t", "a");
  Insert("t", "a");
  const auto b1 = Insert("t", "b");
  ASSERT_TRUE(store_.Reschedule(Claim(a1), true, kNow + 10'000, "HTTP 503", kNow));
  EXPECT_EQ(ClaimIds("t"), (std::vector<std::int64_t>{b1}));
  EXPECT_EQ(store_.BlockedKeyCount(kNow), 1);
  const auto waits = store_.WaitsFor(a1 + 1);
  ASSERT_TRUE(waits);
  EXPECT_EQ(waits->id, a1);
}

TEST_F(OrderingTest, AHeadWithAFutureDeliverAtHoldsItsKey) {
  const auto a1 = Insert("t", "a", kNow + 60'000);  // scheduled a minute ahead
  const auto a2 = Insert("t", "a");
  EXPECT_TRUE(ClaimIds("t").empty());
  EXPECT_EQ(store_.WaitsFor(a2)->id, a1);
  const auto later = store_.ClaimDue("t", "me", kNow + 60'000 + kLease, kNow + 60'000, 10);
  ASSERT_EQ(later.size(), 1U);
  EXPECT_EQ(later[0].lease.id, a1);
}

TEST_F(OrderingTest, DeadHeadBlocksItsKeyUntilAnOperatorRetriesIt) {
  const auto a1 = Insert("t", "a");
  const auto a2 = Insert("t", "a");
  Dead(a1, "permanent");
  EXPECT_TRUE(ClaimIds("t").empty());
  EXPECT_EQ(store_.BlockedKeyCount(kNow), 1);
  const auto heads = store_.BlockedHeads(kNow, 0, 10);
  ASSERT_EQ(heads.size(), 1U);
  EXPECT_EQ(heads[0].id, a1);
  EXPECT_EQ(store_.WaitsFor(a2)->id, a1);

  ASSERT_EQ(RetryDead(a1), 1);
  EXPECT_EQ(ClaimIds("t"), (std::vector<std::int64_t>{a1}));
  EXPECT_EQ(store_.BlockedKeyCount(kNow), 0);
}

TEST_F(OrderingTest, PurgingADeadHeadUnblocksItsKey) {
  const auto a1 = Insert("t", "a");
  const auto a2 = Insert("t", "a");
  Dead(a1, "attempts");
  ASSERT_EQ(PurgeDead(a1), 1);
  EXPECT_EQ(ClaimIds("t"), (std::vector<std::int64_t>{a2}));
}

TEST_F(OrderingTest, DeadHeadWithSkipLetsTheNextRowGo) {
  Order("s", DeadHead::kSkip);
  const auto a1 = Insert("s", "a");
  const auto a2 = Insert("s", "a");
  Dead(a1, "permanent");
  EXPECT_EQ(ClaimIds("s"), (std::vector<std::int64_t>{a2}));
  EXPECT_FALSE(store_.WaitsFor(a2));
}

TEST_F(OrderingTest, ExpiredOrCancelledHeadsNeverBlock) {
  for (const char* reason : {"expired", "cancelled"}) {
    const std::string key = std::string("k-") + reason;
    const auto first = Insert("t", key);
    const auto second = Insert("t", key);
    Dead(first, reason);
    EXPECT_EQ(ClaimIds("t"), (std::vector<std::int64_t>{second})) << reason;
  }
}

TEST_F(OrderingTest, QuarantinedRowsKeepTheOrderToo) {
  const auto a1 = Insert("t", "a");
  const auto a2 = Insert("t", "a");
  Claim(a1);
  store_.connection().exec("UPDATE outbox SET quarantined = 1 WHERE id = " + std::to_string(a2));
  EXPECT_TRUE(store_.ClaimDue("t", "me", kNow + kLease, kNow, 10, /*quarantined_only=*/true)
                  .empty());
}

// --- runs (docs/ordering.md, "Runs") -----------------------------------------

std::vector<std::int64_t> IdsOf(const std::vector<Claimed>& claimed) {
  std::vector<std::int64_t> ids;
  for (const auto& c : claimed) ids.push_back(c.lease.id);
  return ids;
}

// The key's head and the run that grows behind it, as a worker claims them.
std::vector<Claimed> ClaimRun(Store& store, int rows, std::int64_t bytes) {
  std::vector<Claimed> run;
  auto head = store.ClaimNextOfKey("t", "a", "me", kNow + kLease, kNow);
  if (!head) return run;
  run.push_back(*head);
  for (auto& c : store.ClaimRunAfter(head->lease, "t", "a", "me", kNow + kLease, kNow, rows, bytes)) {
    run.push_back(c);
  }
  return run;
}

TEST_F(OrderingTest, ARunIsTheHeadAndTheUnbrokenReadyRowsBehindItInIdOrder) {
  const auto a1 = Insert("t", "a");
  const auto b1 = Insert("t", "b");
  const auto a2 = Insert("t", "a");
  const auto a3 = Insert("t", "a");
  const auto a4 = Insert("t", "a", kNow + 60'000);  // waits for its retry: ends the run
  Insert("t", "a");
  const auto run = ClaimRun(store_, 100, 1 << 20);
  EXPECT_EQ(IdsOf(run), (std::vector<std::int64_t>{a1, a2, a3}));
  for (const auto& c : run) {
    EXPECT_EQ(c.row.status, Status::kInFlight);
    EXPECT_EQ(c.row.payload, "p");  // the claim returned the rows whole
  }
  // Nothing else of the key goes while the run is out; other keys do.
  EXPECT_TRUE(ClaimRun(store_, 100, 1 << 20).empty());
  EXPECT_EQ(ClaimIds("t"), (std::vector<std::int64_t>{b1}));
  EXPECT_EQ(store_.Get(a4)->status, Status::kPending);
}

TEST_F(OrderingTest, ARunStopsAtTheRowAndByteCapsAndNeverPassesAnUndeliveredRow) {
  std::vector<std::int64_t> a;
  for (int i = 0; i < 6; ++i) a.push_back(Insert("t", "a"));
  const auto claim_and_revert = [&](int rows, std::int64_t bytes) {
    const auto run = ClaimRun(store_, rows, bytes);
    for (const auto& c : run) EXPECT_TRUE(store_.Revert(c.lease, kNow));
    return IdsOf(run);
  };
  // Row and byte caps (after the head): payloads are 1 byte.
  EXPECT_EQ(claim_and_revert(1, 1 << 20), (std::vector<std::int64_t>{a[0], a[1]}));
  EXPECT_EQ(claim_and_revert(100, 3), (std::vector<std::int64_t>{a[0], a[1], a[2], a[3]}));
  // A row in flight in the middle (an operator's retry can leave one
  // behind a pending row) ends the run before it.
  store_.connection().exec("UPDATE outbox SET status = 3, lease_owner = 'x' WHERE id = " +
                           std::to_string(a[3]));
  EXPECT_EQ(claim_and_revert(100, 1 << 20), (std::vector<std::int64_t>{a[0], a[1], a[2]}));
}

TEST_F(OrderingTest, ARunGrowsOnlyBehindItsOwnLastRow) {
  std::vector<std::int64_t> a;
  for (int i = 0; i < 6; ++i) a.push_back(Insert("t", "a"));
  const auto run = ClaimRun(store_, 1, 1 << 20);
  ASSERT_EQ(IdsOf(run), (std::vector<std::int64_t>{a[0], a[1]}));
  const Lease last = run.back().lease;
  // Another owner, or a stale lease, cannot grow it.
  EXPECT_TRUE(store_.ClaimRunAfter(last, "t", "a", "other", kNow + kLease, kNow, 10, 1 << 20)
                  .empty());
  EXPECT_TRUE(store_.ClaimRunAfter({last.id, last.token + 1}, "t", "a", "me", kNow + kLease, kNow,
                                   10, 1 << 20)
                  .empty());
  // Its owner can, while the run's earlier rows are still in flight.
  ASSERT_TRUE(store_.Complete(run[0].lease, kNow));
  const auto grown = store_.ClaimRunAfter(last, "t", "a", "me", kNow + kLease, kNow, 2, 1 << 20);
  EXPECT_EQ(IdsOf(grown), (std::vector<std::int64_t>{a[2], a[3]}));
  // Not behind a row that is no longer in flight (its outcome came first).
  ASSERT_TRUE(store_.Revert(grown.back().lease, kNow));
  EXPECT_TRUE(store_.ClaimRunAfter(grown.back().lease, "t", "a", "me", kNow + kLease, kNow, 2,
                                   1 << 20)
                  .empty());
}

TEST_F(OrderingTest, ARunDoesNotGrowPastAnOlderRowThatIsNotPartOfIt) {
  std::vector<std::int64_t> a;
  for (int i = 0; i < 4; ++i) a.push_back(Insert("t", "a"));
  const auto run = ClaimRun(store_, 1, 1 << 20);
  ASSERT_EQ(IdsOf(run), (std::vector<std::int64_t>{a[0], a[1]}));
  // The run's head went back to pending (a revert another writer made):
  // growing now would let a later row go while an earlier one waits.
  ASSERT_TRUE(store_.Revert(run[0].lease, kNow));
  EXPECT_TRUE(store_.ClaimRunAfter(run[1].lease, "t", "a", "me", kNow + kLease, kNow, 2, 1 << 20)
                  .empty());
}

TEST_F(OrderingTest, TheFirstRecordedModeWinsAndIsReadBack) {
  EXPECT_EQ(store_.AgreeOrdering("t", {true, DeadHead::kSkip}, kNow),
            (TopicOrdering{true, DeadHead::kBlock}));
  EXPECT_EQ(store_.AgreeOrdering("t", {}, kNow), (TopicOrdering{true, DeadHead::kBlock}));
  EXPECT_EQ(store_.AgreeOrdering("plain", {}, kNow), TopicOrdering{});
  EXPECT_EQ(store_.RecordedOrderings().size(), 1U);
  EXPECT_TRUE(store_.ForgetOrdering("t"));
  EXPECT_TRUE(store_.RecordedOrderings().empty());
  EXPECT_EQ(Describe({true, DeadHead::kSkip}), "by key, dead_head skip");
  EXPECT_EQ(Describe({}), "none");
}

// Schema 6 keeps delivered rows out of outbox_ordering through delivered_at:
// set by the statements that deliver, cleared when a row leaves delivered
// (by the store or by plain SQL; the trigger outbox_delivered_at sees both).
std::optional<std::int64_t> DeliveredAt(Store& store, std::int64_t id) {
  SQLite::Statement q(store.connection(), "SELECT delivered_at FROM outbox WHERE id = ?");
  q.bind(1, id);
  EXPECT_TRUE(q.executeStep()) << id;
  if (q.getColumn(0).isNull()) return std::nullopt;
  return q.getColumn(0).getInt64();
}

TEST_F(OrderingTest, DeliveredAtIsSetOnDeliveryAndClearedWhenTheRowComesBack) {
  const auto a1 = Insert("t", "a");
  const auto a2 = Insert("t", "a");
  EXPECT_FALSE(DeliveredAt(store_, a1));
  const Lease lease = Claim(a1);
  EXPECT_FALSE(DeliveredAt(store_, a1));  // in flight is not delivered
  ASSERT_TRUE(store_.Complete(lease, kNow + 5));
  EXPECT_EQ(DeliveredAt(store_, a1), kNow + 5);
  // Plain SQL, both ways, as another application might write it.
  store_.connection().exec("UPDATE outbox SET status = 0 WHERE id = " + std::to_string(a1));
  EXPECT_FALSE(DeliveredAt(store_, a1));
  EXPECT_FALSE(store_.ClaimById(a2, "me", kNow + kLease, kNow));  // a1 holds the key again
  store_.connection().exec("UPDATE outbox SET status = 1, updated_at = 7 WHERE id = " +
                           std::to_string(a1));
  EXPECT_EQ(DeliveredAt(store_, a1), 7);
  EXPECT_EQ(ClaimIds("t"), (std::vector<std::int64_t>{a2}));
}

// A reconcile that requeues a delivered row puts it back in front of its
// key: later rows not yet sent wait for it (docs/ordering.md, "What can
// reorder": only rows that already arrived go before it).
TEST_F(OrderingTest, ARequeuedRowHoldsItsKeyAgain) {
  const auto a1 = Insert("t", "a");
  const auto a2 = Insert("t", "a");
  ASSERT_TRUE(store_.Complete(Claim(a1), kNow));
  Operator op(store_);
  const std::int64_t ids[] = {a1};
  ASSERT_EQ(op.Requeue(ids, {"test", "host"}, "requeue", kNow), 1);
  EXPECT_FALSE(DeliveredAt(store_, a1));
  EXPECT_EQ(ClaimIds("t"), (std::vector<std::int64_t>{a1}));
  EXPECT_EQ(store_.WaitsFor(a2)->id, a1);
}

// Marking a pending head delivered by hand lets the next row of its key go.
TEST_F(OrderingTest, AnOperatorMarkingTheHeadDeliveredLetsTheKeyGoOn) {
  const auto a1 = Insert("t", "a");
  const auto a2 = Insert("t", "a");
  const std::int64_t ids[] = {a1};
  ASSERT_EQ(Operator(store_).MarkDeliveredIds(ids, {"test", "host"}, "applied", kNow + 3), 1);
  EXPECT_EQ(DeliveredAt(store_, a1), kNow + 3);
  EXPECT_EQ(ClaimIds("t"), (std::vector<std::int64_t>{a2}));
}

// Parking (docs/ordering.md, "Dead heads"): the due rows behind a dead head
// under "block" leave the claim's due range until the key can go on.
std::int64_t NextAttemptAt(Store& store, std::int64_t id) {
  SQLite::Statement q(store.connection(), "SELECT next_attempt_at FROM outbox WHERE id = ?");
  q.bind(1, id);
  EXPECT_TRUE(q.executeStep()) << id;
  return q.getColumn(0).getInt64();
}

int DueRows(Store& store, const std::string& topic, std::int64_t now) {
  SQLite::Statement q(store.connection(),
                      "SELECT count(*) FROM outbox WHERE status = 0 AND topic = ?"
                      " AND next_attempt_at <= ?");
  q.bind(1, topic);
  q.bind(2, now);
  EXPECT_TRUE(q.executeStep());
  return q.getColumn(0).getInt();
}

class ParkingTest : public OrderingTest {
 protected:
  // a1 dead (permanent) with a2, a3 behind it; b1 free.
  void SetUp() override {
    a1_ = Insert("t", "a");
    a2_ = Insert("t", "a");
    a3_ = Insert("t", "a");
    b1_ = Insert("t", "b");
    Dead(a1_, "permanent");
  }
  std::int64_t a1_ = 0, a2_ = 0, a3_ = 0, b1_ = 0;
};

TEST_F(ParkingTest, RowsBehindADeadHeadLeaveTheDueRange) {
  EXPECT_EQ(DueRows(store_, "t", kNow), 3);
  EXPECT_EQ(store_.ParkBehindDeadHeads("t", kNow + 1), 2);
  EXPECT_EQ(NextAttemptAt(store_, a2_), kParkedAt);
  EXPECT_EQ(NextAttemptAt(store_, a3_), kParkedAt);
  EXPECT_EQ(DueRows(store_, "t", kNow + 1), 1);
  EXPECT_EQ(ClaimIds("t"), (std::vector<std::int64_t>{b1_}));
  // Still blocked, still shown as such.
  EXPECT_EQ(store_.WaitsFor(a3_)->id, a1_);
  EXPECT_EQ(store_.BlockedKeyCount(kNow), 1);
  // A second pass finds nothing new; a row added later is parked by the next.
  EXPECT_EQ(store_.ParkBehindDeadHeads("t", kNow + 2), 0);
  const auto a4 = Insert("t", "a");
  EXPECT_EQ(store_.ParkBehindDeadHeads("t", kNow + 3), 1);
  EXPECT_EQ(NextAttemptAt(store_, a4), kParkedAt);
  // The wall clock's far-ahead fix leaves parked rows alone.
  EXPECT_EQ(store_.MakeDueIfFarAhead("t", kNow, 60'000), 0);
}

TEST_F(ParkingTest, RetryingTheDeadHeadGivesTheParkedRowsTheirPlaceBack) {
  ASSERT_EQ(store_.ParkBehindDeadHeads("t", kNow), 2);
  ASSERT_EQ(RetryDead(a1_), 1);
  EXPECT_EQ(NextAttemptAt(store_, a2_), kNow);  // due since it was parked
  EXPECT_EQ(NextAttemptAt(store_, a3_), kNow);
  EXPECT_EQ(ClaimIds("t"), (std::vector<std::int64_t>{a1_, b1_}));
  // The key goes on in order: the retried head first, then a2 behind it.
  const auto next = store_.ClaimNextOfKey("t", "a", "me", kNow + kLease, kNow);
  EXPECT_FALSE(next);
}

TEST_F(ParkingTest, PurgingCancellingOrDeliveringTheDeadHeadUnparks) {
  ASSERT_EQ(store_.ParkBehindDeadHeads("t", kNow), 2);
  ASSERT_EQ(PurgeDead(a1_), 1);
  EXPECT_EQ(ClaimIds("t"), (std::vector<std::int64_t>{a2_, b1_}));

  const auto c1 = Insert("t", "c");
  const auto c2 = Insert("t", "c");
  Dead(c1, "attempts");
  ASSERT_EQ(store_.ParkBehindDeadHeads("t", kNow), 1);
  RowSelector selector;
  selector.id = c1;
  ASSERT_EQ(Operator(store_).Cancel(selector, {"test", "host"}, kNow + 2), 1);
  EXPECT_EQ(ClaimIds("t"), (std::vector<std::int64_t>{c2}));

  const auto d1 = Insert("t", "d");
  const auto d2 = Insert("t", "d");
  Dead(d1, "hook");
  ASSERT_EQ(store_.ParkBehindDeadHeads("t", kNow), 1);
  // Plain SQL, as an application's own repair might do it.
  store_.connection().exec("UPDATE outbox SET status = 1 WHERE id = " + std::to_string(d1));
  EXPECT_EQ(ClaimIds("t"), (std::vector<std::int64_t>{d2}));
}

TEST_F(ParkingTest, ForgettingTheTopicsOrderingUnparks) {
  ASSERT_EQ(store_.ParkBehindDeadHeads("t", kNow + 1), 2);
  ASSERT_TRUE(store_.ForgetOrdering("t"));
  EXPECT_EQ(DueRows(store_, "t", kNow + 1), 3);
}

TEST_F(ParkingTest, OnlyRowsThatCannotGoAndWereNeverTriedAreParked) {
  // Skip mode, an expired or cancelled head: the rows behind may go.
  Order("s", DeadHead::kSkip);
  const auto s1 = Insert("s", "a");
  Insert("s", "a");
  Dead(s1, "permanent");
  EXPECT_EQ(store_.ParkBehindDeadHeads("s", kNow), 0);
  const auto e1 = Insert("t", "e");
  Insert("t", "e");
  Dead(e1, "expired");
  // A row that was tried keeps its own schedule; a quarantined one its own
  // claim; a row not yet due is left until it is.
  store_.connection().exec("UPDATE outbox SET attempts = 1 WHERE id = " + std::to_string(a2_));
  store_.connection().exec("UPDATE outbox SET quarantined = 1 WHERE id = " +
                           std::to_string(a3_));
  const auto later = Insert("t", "a", kNow + 60'000);
  EXPECT_EQ(store_.ParkBehindDeadHeads("t", kNow), 0);
  EXPECT_EQ(NextAttemptAt(store_, later), kNow + 60'000);
}

// Two connections on one file, as two agents: whatever interleaving of
// claims and completions, a key never has two rows in flight and each key's
// rows are claimed in id order.
TEST(OrderingFileTest, TwoConnectionsNeverHaveTwoRowsOfAKeyInFlight) {
  outbox::testing::TempDir dir;
  Options options;
  options.path = dir.File("o.db");
  options.create = true;
  Store a(options);
  options.create = false;
  Store b(options);
  a.AgreeOrdering("t", {true, DeadHead::kBlock}, kNow);
  constexpr int kKeys = 20;
  constexpr int kPerKey = 10;
  for (int i = 0; i < kKeys * kPerKey; ++i) {
    SQLite::Statement q(a.connection(),
                        "INSERT INTO outbox(topic, msg_key, payload, ordering_key, next_attempt_at)"
                        " VALUES('t', ?, 'p', ?, ?)");
    q.bind(1, "m" + std::to_string(i));
    q.bind(2, "k" + std::to_string(i % kKeys));
    q.bind(3, kNow);
    q.exec();
  }
  std::map<std::string, std::int64_t> last_claimed;
  std::vector<std::pair<Lease, std::string>> held;  // in flight across a round
  int delivered = 0;
  for (int round = 0; delivered < kKeys * kPerKey; ++round) {
    ASSERT_LT(round, 1000);
    Store& claimer = round % 2 == 0 ? a : b;
    Store& other = round % 2 == 0 ? b : a;
    const auto claimed = claimer.ClaimDue("t", "x", kNow + kLease, kNow, 7);
    std::set<std::string> in_flight;
    for (const auto& [lease, key] : held) in_flight.insert(key);
    std::vector<std::pair<Lease, std::string>> fresh;
    for (const auto& c : claimed) {
      const Row row = *claimer.Get(c.lease.id);
      ASSERT_TRUE(in_flight.insert(*row.ordering_key).second) << "two rows of one key in flight";
      ASSERT_GT(row.id, last_claimed[*row.ordering_key]) << "a key's rows out of order";
      last_claimed[*row.ordering_key] = row.id;
      fresh.emplace_back(c.lease, *row.ordering_key);
    }
    for (const auto& [lease, key] : held) {
      ASSERT_TRUE(other.Complete(lease, kNow));
      ++delivered;
    }
    held.clear();
    // Half of the new claims finish now, the other half stay in flight
    // while the other connection claims.
    for (std::size_t i = 0; i < fresh.size(); ++i) {
      if (i % 2 == 0) {
        ASSERT_TRUE(claimer.Complete(fresh[i].first, kNow));
        ++delivered;
      } else {
        held.push_back(fresh[i]);
      }
    }
  }
}

}  // namespace
}  // namespace outbox::store
