#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "../../store/src/sql.h"
#include "../common/temp_dir.h"
#include "outbox/store.h"

namespace outbox::store {
namespace {

using outbox::testing::TempDir;

constexpr std::int64_t kNow = 1'700'000'000'000;
constexpr std::int64_t kLease = 60'000;
constexpr std::int64_t kCap = 86'400'000;

Options Memory() {
  Options options;
  options.path = ":memory:";
  options.create = true;
  return options;
}

class StoreTest : public ::testing::Test {
 protected:
  StoreTest() : store_(WithBootClock(Memory())) {}

  // The store reads this test's boot clock, which only the test moves.
  Options WithBootClock(Options options) {
    options.boot_clock = [this] { return BootTime{boot_id_, boot_ms_}; };
    return options;
  }

  // Inserts with plain SQL, as another application would, due at `due`.
  std::int64_t Insert(const std::string& topic, const std::string& key, std::int64_t due = kNow,
                      std::int64_t created = kNow) {
    SQLite::Statement q(store_.connection(),
                        "INSERT INTO outbox(topic, msg_key, payload, next_attempt_at, "
                        "created_at, updated_at) VALUES(?, ?, 'p', ?, ?, ?)");
    q.bind(1, topic);
    q.bind(2, key);
    q.bind(3, due);
    q.bind(4, created);
    q.bind(5, created);
    q.exec();
    return store_.connection().getLastInsertRowid();
  }

  Row Get(std::int64_t id) { return *store_.Get(id); }

  Lease Claim(std::int64_t id, std::string_view owner = "me") {
    auto claimed = store_.ClaimById(id, owner, kNow + kLease, kNow);
    EXPECT_TRUE(claimed);
    return claimed ? claimed->lease : Lease{};
  }

  std::vector<std::int64_t> Ids(const std::vector<Claimed>& claimed) {
    std::vector<std::int64_t> ids;
    for (const auto& c : claimed) ids.push_back(c.lease.id);
    return ids;
  }

  std::string boot_id_ = "boot-1";
  std::int64_t boot_ms_ = 5'000'000;  // ms since this boot
  Store store_;
};

TEST_F(StoreTest, ClaimByIdTakesOnlyPendingRows) {
  const auto id = Insert("t", "a");
  auto claimed = store_.ClaimById(id, "me", kNow + kLease, kNow);
  ASSERT_TRUE(claimed);
  EXPECT_EQ(claimed->topic, "t");
  const Row row = Get(id);
  EXPECT_EQ(row.status, Status::kInFlight);
  EXPECT_EQ(row.lease_owner, "me");
  EXPECT_EQ(row.lease_token, claimed->lease.token);
  EXPECT_EQ(row.lease_expires_at, kNow + kLease);
  EXPECT_FALSE(row.last_attempt_at);  // set when an attempt fails
  EXPECT_FALSE(store_.ClaimById(id, "other", kNow + kLease, kNow));
  EXPECT_FALSE(store_.ClaimById(id + 100, "me", kNow + kLease, kNow));
}

TEST_F(StoreTest, ClaimDueOrdersByDueTimeThenIdWithinTheLimit) {
  const auto late = Insert("t", "late", kNow - 10);
  const auto early = Insert("t", "early", kNow - 1000);
  const auto tie_a = Insert("t", "tie-a", kNow - 500);
  const auto tie_b = Insert("t", "tie-b", kNow - 500);
  Insert("t", "future", kNow + 5000);
  auto first = store_.ClaimDue("t", "me", kNow + kLease, kNow, 2);
  auto ids = Ids(first);
  std::sort(ids.begin(), ids.end());
  std::vector<std::int64_t> expected{early, tie_a};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(ids, expected);
  auto second = store_.ClaimDue("t", "me", kNow + kLease, kNow, 10);
  ids = Ids(second);
  std::sort(ids.begin(), ids.end());
  expected = {tie_b, late};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(ids, expected);
  EXPECT_TRUE(store_.ClaimDue("t", "me", kNow + kLease, kNow, 10).empty());
}

TEST_F(StoreTest, ClaimDueStaysWithinItsTopic) {
  Insert("a", "1");
  const auto b = Insert("b", "1");
  auto claimed = store_.ClaimDue("b", "me", kNow + kLease, kNow, 10);
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].lease.id, b);
  EXPECT_EQ(claimed[0].topic, "b");
}

TEST_F(StoreTest, RowsScheduledBeforeTheClockJumpedBackAreDue) {
  const auto stuck = Insert("t", "stuck", kNow + 10 * kCap);
  Insert("t", "later", kNow + 1000);
  EXPECT_FALSE(store_.HasDue("t", kNow));
  EXPECT_EQ(store_.MakeDueIfFarAhead("t", kNow, kCap), 1);
  EXPECT_TRUE(store_.HasDue("t", kNow));
  auto claimed = store_.ClaimDue("t", "me", kNow + kLease, kNow, 10);
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].lease.id, stuck);
}

TEST_F(StoreTest, CompleteNeedsTheCurrentLease) {
  const auto id = Insert("t", "a");
  const Lease lease = Claim(id);
  EXPECT_FALSE(store_.Complete({id, lease.token + 1}, kNow));
  EXPECT_EQ(Get(id).status, Status::kInFlight);
  EXPECT_TRUE(store_.Complete(lease, kNow + 5));
  const Row row = Get(id);
  EXPECT_EQ(row.status, Status::kDelivered);
  EXPECT_EQ(row.updated_at, kNow + 5);
  EXPECT_FALSE(row.lease_owner);
  EXPECT_FALSE(store_.Complete(lease, kNow + 6));  // a duplicate report changes nothing
}

// An acknowledged batch: every lease at one time, more of them than the
// largest VALUES chunk (32), so one statement (kCompleteMany) records them.
TEST_F(StoreTest, CompletingABatchAtOneTimeDeliversEveryLeaseStillHeld) {
  std::vector<DeliveredLease> delivered;
  std::vector<std::int64_t> held;
  for (int i = 0; i < 34; ++i) {
    const auto id = Insert("t", "k" + std::to_string(i));
    held.push_back(id);
    delivered.push_back({Claim(id), kNow + 7});
  }
  const auto b = Insert("t", "b");
  const auto d = Insert("t", "d");
  const Lease lb = Claim(b);
  delivered.push_back({{lb.id, lb.token + 1}, kNow + 7});
  delivered.push_back({{d, 1}, kNow + 7});
  EXPECT_EQ(store_.Complete(delivered), 34);
  for (const auto id : held) {
    const Row row = Get(id);
    EXPECT_EQ(row.status, Status::kDelivered);
    EXPECT_EQ(row.updated_at, kNow + 7);
    EXPECT_FALSE(row.lease_owner);
    EXPECT_FALSE(row.lease_expires_at);
  }
  EXPECT_EQ(Get(b).status, Status::kInFlight);  // its lease moved on
  EXPECT_EQ(Get(d).status, Status::kPending);   // never claimed
  EXPECT_EQ(store_.GetStats().undelivered, 2);
  for (auto& each : delivered) each.now = kNow + 8;
  EXPECT_EQ(store_.Complete(delivered), 0);  // a duplicate report changes nothing
  EXPECT_EQ(Get(held.front()).updated_at, kNow + 7);
}

TEST_F(StoreTest, StaleWorkerChangesNothingAfterRecycleAndReclaim) {
  const auto id = Insert("t", "a");
  const Lease stale = Claim(id, "slow-agent");
  boot_ms_ += kLease + 1;
  EXPECT_EQ(store_.RecycleExpired(kNow + kLease + 1, kLease, 100).size(), 1u);
  auto fresh = store_.ClaimById(id, "other-agent", kNow + 3 * kLease, kNow + kLease + 2);
  ASSERT_TRUE(fresh);
  EXPECT_NE(fresh->lease.token, stale.token);
  EXPECT_FALSE(store_.Complete(stale, kNow + kLease + 3));
  EXPECT_FALSE(store_.Reschedule(stale, true, kNow, "late", kNow + kLease + 3));
  EXPECT_FALSE(store_.MarkDead(stale, true, "late", "permanent", kNow + kLease + 3));
  EXPECT_FALSE(store_.Revert(stale, kNow + kLease + 3));
  const Row row = Get(id);
  EXPECT_EQ(row.status, Status::kInFlight);
  EXPECT_EQ(row.lease_owner, "other-agent");
  EXPECT_EQ(row.attempts, 0);
}

// 70 leases cross every chunk size of the multi-row statement (32, 16, 8,
// 4, 2 and the single one); stale leases among them change nothing.
TEST_F(StoreTest, CompletingLeasesAtTheirOwnTimesDeliversEveryHeldOne) {
  std::vector<DeliveredLease> delivered;
  std::vector<std::int64_t> stale_ids;
  for (int i = 0; i < 70; ++i) {
    const auto id = Insert("t", "k" + std::to_string(i));
    const Lease lease = Claim(id);
    if (i % 9 == 4) {
      delivered.push_back({{id, lease.token + 1}, kNow + i});
      stale_ids.push_back(id);
    } else {
      delivered.push_back({lease, kNow + i});
    }
  }
  const Lease done_before = delivered.front().lease;
  ASSERT_TRUE(store_.Complete(done_before, kNow));
  const int expected = 70 - static_cast<int>(stale_ids.size()) - 1;
  EXPECT_EQ(store_.Complete(delivered), expected);
  for (int i = 0; i < 70; ++i) {
    const Row row = Get(delivered[static_cast<std::size_t>(i)].lease.id);
    if (i % 9 == 4) {
      EXPECT_EQ(row.status, Status::kInFlight) << i;
      EXPECT_TRUE(row.lease_owner) << i;
    } else {
      EXPECT_EQ(row.status, Status::kDelivered) << i;
      EXPECT_EQ(row.updated_at, i == 0 ? kNow : kNow + i) << i;
      EXPECT_FALSE(row.lease_owner) << i;
    }
  }
  EXPECT_EQ(store_.connection().execAndGet(
                "SELECT count(*) FROM outbox WHERE status = 1 AND delivered_at = updated_at")
                .getInt(),
            70 - static_cast<int>(stale_ids.size()));
  EXPECT_EQ(store_.GetStats().undelivered, static_cast<std::int64_t>(stale_ids.size()));
  EXPECT_EQ(store_.Complete({}), 0);
}

TEST_F(StoreTest, RescheduleCountsAnAttemptOnlyWhenAsked) {
  const auto id = Insert("t", "a");
  EXPECT_TRUE(store_.Reschedule(Claim(id), true, kNow + 1000, "HTTP 500", kNow));
  Row row = Get(id);
  EXPECT_EQ(row.status, Status::kPending);
  EXPECT_EQ(row.attempts, 1);
  EXPECT_EQ(row.next_attempt_at, kNow + 1000);
  EXPECT_EQ(row.last_attempt_at, kNow);
  EXPECT_EQ(row.last_error, "HTTP 500");
  EXPECT_FALSE(row.lease_owner);
  store_.connection().exec("UPDATE outbox SET next_attempt_at = 0");
  EXPECT_TRUE(store_.Reschedule(Claim(id), false, kNow + 2000, "endpoint down", kNow));
  row = Get(id);
  EXPECT_EQ(row.attempts, 1);
  EXPECT_EQ(row.last_error, "endpoint down");
}

TEST_F(StoreTest, RescheduleAndDeadNeedAnInFlightRow) {
  const auto id = Insert("t", "a");
  EXPECT_FALSE(store_.Reschedule({id, 0}, true, kNow, "x", kNow));
  EXPECT_FALSE(store_.MarkDead({id, 0}, true, "x", "permanent", kNow));
  EXPECT_FALSE(store_.Revert({id, 0}, kNow));
  EXPECT_EQ(Get(id).status, Status::kPending);
}

TEST_F(StoreTest, MarkDeadRecordsTheError) {
  const auto id = Insert("t", "a");
  EXPECT_TRUE(store_.MarkDead(Claim(id), true, "HTTP 422: bad order", "permanent", kNow));
  const Row row = Get(id);
  EXPECT_EQ(row.status, Status::kDead);
  EXPECT_EQ(row.attempts, 1);
  EXPECT_EQ(row.last_error, "HTTP 422: bad order");
}

TEST_F(StoreTest, RevertReturnsTheRowWithoutCountingAnAttempt) {
  const auto id = Insert("t", "a", kNow - 100);
  EXPECT_TRUE(store_.Revert(Claim(id), kNow + 7));
  const Row row = Get(id);
  EXPECT_EQ(row.status, Status::kPending);
  EXPECT_EQ(row.attempts, 0);
  EXPECT_EQ(row.next_attempt_at, kNow + 7);
}

TEST_F(StoreTest, RecycleOnlyAfterTheLeaseExpiresOnTheBootClock) {
  const auto id = Insert("t", "a");
  Claim(id);
  boot_ms_ += kLease - 1;
  EXPECT_EQ(store_.RecycleExpired(kNow + kLease - 1, kLease, 100).size(), 0u);
  EXPECT_EQ(Get(id).status, Status::kInFlight);
  boot_ms_ += 1;
  EXPECT_EQ(store_.RecycleExpired(kNow + kLease, kLease, 100).size(), 1u);
  const Row row = Get(id);
  EXPECT_EQ(row.status, Status::kPending);
  EXPECT_EQ(row.attempts, 0);
}

TEST_F(StoreTest, WallClockJumpsChangeNoBootClockLease) {
  constexpr std::int64_t kYear = 365LL * 86'400'000;
  const auto id = Insert("t", "a");
  Claim(id);
  boot_ms_ += kLease / 2;
  // A year forward, a year back, far into the past: the lease runs on.
  for (const std::int64_t wall : {kNow + kYear, kNow - kYear, std::int64_t{0}}) {
    EXPECT_EQ(store_.RecycleExpired(wall, kLease, 100).size(), 0u) << wall;
    EXPECT_EQ(Get(id).status, Status::kInFlight) << wall;
  }
  boot_ms_ += kLease / 2;  // ... until the boot clock reaches its end
  EXPECT_EQ(store_.RecycleExpired(kNow - kYear, kLease, 100).size(), 1u);
}

TEST_F(StoreTest, ALeaseTakenInAnotherBootIsOver) {
  const auto id = Insert("t", "a");
  Claim(id);
  boot_id_ = "boot-2";  // rebooted; the new boot clock starts near 0
  boot_ms_ = 1000;
  EXPECT_EQ(store_.RecycleExpired(kNow, kLease, 100).size(), 1u);
  EXPECT_EQ(Get(id).status, Status::kPending);
}

TEST_F(StoreTest, BootLeaseBeyondAnyClaimIsOver) {
  const auto id = Insert("t", "a");
  Claim(id);
  // Another writer left an end no claim of ours could have written.
  store_.connection().exec("UPDATE outbox SET lease_boot_until = 9000000000000");
  EXPECT_EQ(store_.RecycleExpired(kNow, kLease, 100).size(), 1u);
}

TEST_F(StoreTest, LeaseWithoutBootTimeFromBeforeABackwardsJumpIsExpired) {
  boot_id_ = "";  // no boot id on this host: leases on wall time
  const auto id = Insert("t", "a");
  Claim(id);
  EXPECT_EQ(store_.RecycleExpired(kNow + kLease - 1, kLease, 100).size(), 0u);
  // The clock went back a day: the lease now seems to run for a day more.
  EXPECT_EQ(store_.RecycleExpired(kNow - kCap, kLease, 100).size(), 1u);
  EXPECT_EQ(Get(id).status, Status::kPending);
}

TEST_F(StoreTest, LeaseWrittenByAnOlderVersionExpiresOnWallTime) {
  const auto id = Insert("t", "a");
  Claim(id);
  store_.connection().exec("UPDATE outbox SET lease_boot_id = NULL, lease_boot_until = NULL");
  EXPECT_EQ(store_.RecycleExpired(kNow + kLease - 1, kLease, 100).size(), 0u);
  EXPECT_EQ(store_.RecycleExpired(kNow + kLease, kLease, 100).size(), 1u);
}

TEST(StoreBootClock, SystemBootTimeKnowsThisBootAndMovesForward) {
  const BootTime first = SystemBootTime();
  const BootTime second = SystemBootTime();
  EXPECT_EQ(first.boot_id, second.boot_id);
  EXPECT_EQ(first.boot_id.size(), 36u) << first.boot_id;  // a UUID, where /proc has one
  EXPECT_GT(first.ms, 0);
  EXPECT_GE(second.ms, first.ms);
}

TEST_F(StoreTest, TakeBackCountsACrashOnlyForARowAloneInFlight) {
  const auto a = Insert("t", "a");
  const auto b = Insert("t", "b");
  Claim(a, "dead-1");
  Claim(b, "dead-1");
  EXPECT_EQ(store_.TakeBackOwner("dead-1", 3, kNow).quarantined, 2);
  EXPECT_EQ(Get(a).crashes, 0);
  EXPECT_TRUE(Get(a).quarantined);
  EXPECT_EQ(Get(a).status, Status::kPending);
  // Quarantined rows are not claimed with the others...
  EXPECT_TRUE(store_.ClaimDue("t", "me", kNow + kLease, kNow, 10).empty());
  EXPECT_FALSE(store_.ClaimById(a, "me", kNow + kLease, kNow));
  EXPECT_EQ(store_.QuarantinedCount(), 2);
  // ...but one at a time.
  auto one = store_.ClaimDue("t", "dead-2", kNow + kLease, kNow, 1, true);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(store_.TakeBackOwner("dead-2", 3, kNow).quarantined, 1);
  EXPECT_EQ(Get(one[0].lease.id).crashes, 1);
}

TEST_F(StoreTest, CrashBudgetKillsThePoisonRow) {
  const auto id = Insert("t", "poison");
  for (int crash = 1; crash <= 3; ++crash) {
    auto claimed = store_.ClaimDue("t", "agent", kNow + kLease, kNow, 1, crash > 1);
    ASSERT_EQ(claimed.size(), 1u) << crash;
    const Store::TakeBack taken = store_.TakeBackOwner("agent", 3, kNow);
    EXPECT_EQ(taken.dead_topics.size(), crash == 3 ? 1u : 0u);
  }
  const Row row = Get(id);
  EXPECT_EQ(row.status, Status::kDead);
  EXPECT_EQ(row.crashes, 3);
  ASSERT_TRUE(row.last_error);
  EXPECT_NE(row.last_error->find("crash budget"), std::string::npos);
}

TEST_F(StoreTest, CompletingAQuarantinedRowClearsTheQuarantine) {
  const auto id = Insert("t", "a");
  Claim(id, "dead");
  store_.TakeBackOwner("dead", 3, kNow);
  auto claimed = store_.ClaimDue("t", "me", kNow + kLease, kNow, 1, true);
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_TRUE(store_.Complete(claimed[0].lease, kNow));
  EXPECT_FALSE(Get(id).quarantined);
  EXPECT_EQ(store_.QuarantinedCount(), 0);
}

TEST_F(StoreTest, LeaseOwnersListsEachOwnerOnce) {
  Claim(Insert("t", "a"), "x");
  Claim(Insert("t", "b"), "x");
  Claim(Insert("t", "c"), "y");
  auto owners = store_.LeaseOwners();
  std::sort(owners.begin(), owners.end());
  EXPECT_EQ(owners, (std::vector<std::string>{"x", "y"}));
}

TEST_F(StoreTest, OperatorRetryTouchesOnlyDeadRowsAndResetsTheBudget) {
  const auto dead = Insert("t", "dead");
  store_.MarkDead(Claim(dead), true, "boom", "permanent", kNow);
  store_.connection().exec("UPDATE outbox SET attempts = 8 WHERE id = " + std::to_string(dead));
  const auto pending = Insert("t", "pending");
  const auto delivered = Insert("t", "delivered");
  store_.Complete(Claim(delivered), kNow);
  const auto other_dead = Insert("u", "dead");
  store_.MarkDead(Claim(other_dead), true, "boom", "permanent", kNow);

  Operator operator_actions(store_);
  const Actor actor{"operator", "host"};
  RowSelector by_topic;
  by_topic.topic = "t";
  EXPECT_EQ(operator_actions.Retry(by_topic, actor, kNow + 10), 1);
  const Row row = Get(dead);
  EXPECT_EQ(row.status, Status::kPending);
  EXPECT_EQ(row.attempts, 0);
  EXPECT_EQ(row.next_attempt_at, kNow + 10);
  EXPECT_EQ(row.operator_retries, 1);
  EXPECT_EQ(Get(pending).status, Status::kPending);
  EXPECT_EQ(Get(delivered).status, Status::kDelivered);
  EXPECT_EQ(Get(other_dead).status, Status::kDead);

  SQLite::Statement audit(store_.connection(), "SELECT actor, action, rows FROM outbox_audit");
  ASSERT_TRUE(audit.executeStep());
  EXPECT_EQ(audit.getColumn(0).getString(), "operator");
  EXPECT_EQ(audit.getColumn(1).getString(), "retry");
  EXPECT_EQ(audit.getColumn(2).getInt64(), 1);

  RowSelector all;
  all.all = true;
  EXPECT_EQ(operator_actions.Retry(all, actor, kNow), 1);
  EXPECT_EQ(Get(other_dead).status, Status::kPending);
}

TEST_F(StoreTest, PurgeDeliveredKeepsEverythingElse) {
  const auto old_delivered = Insert("t", "old");
  store_.Complete(Claim(old_delivered), kNow - 10'000);
  const auto new_delivered = Insert("t", "new");
  store_.Complete(Claim(new_delivered), kNow);
  const auto pending = Insert("t", "pending", kNow, kNow - 50'000);
  const auto in_flight = Insert("t", "in-flight");
  Claim(in_flight);
  const auto dead = Insert("t", "dead");
  store_.MarkDead(Claim(dead), true, "x", "permanent", kNow - 50'000);

  EXPECT_EQ(store_.PeekDelivered(kNow - 1, 10).size(), 1u);
  EXPECT_EQ(store_.PurgeDelivered(kNow - 1, 10), 1);
  EXPECT_FALSE(store_.Get(old_delivered));
  EXPECT_TRUE(store_.Get(new_delivered));
  // A cutoff in the future purges every delivered row and nothing else.
  EXPECT_EQ(store_.PurgeDelivered(kNow + 1, 10), 1);
  EXPECT_TRUE(store_.Get(pending));
  EXPECT_TRUE(store_.Get(in_flight));
  EXPECT_TRUE(store_.Get(dead));
}

TEST_F(StoreTest, ReleaseOwnerRevertsOnlyThatOwnersRows) {
  const auto mine = Insert("t", "a");
  const auto theirs = Insert("t", "b");
  Claim(mine, "me");
  Claim(theirs, "them");
  EXPECT_EQ(store_.ReleaseOwner("me", kNow), 1);
  EXPECT_EQ(Get(mine).status, Status::kPending);
  EXPECT_EQ(Get(mine).attempts, 0);
  EXPECT_EQ(Get(theirs).status, Status::kInFlight);
}

TEST_F(StoreTest, DeleteDeliveredSparesRowsThatAreNotDelivered) {
  const auto delivered = Insert("t", "a");
  store_.Complete(Claim(delivered), kNow);
  const auto pending = Insert("t", "b");
  EXPECT_EQ(store_.DeleteDelivered({delivered, pending}), 1);
  EXPECT_FALSE(store_.Get(delivered));
  EXPECT_TRUE(store_.Get(pending));
}

TEST_F(StoreTest, PurgeRunsInBoundedBatches) {
  for (int i = 0; i < 25; ++i) store_.Complete(Claim(Insert("t", std::to_string(i))), kNow);
  EXPECT_EQ(store_.PurgeDelivered(kNow + 1, 10), 10);
  EXPECT_EQ(store_.PurgeDelivered(kNow + 1, 10), 10);
  EXPECT_EQ(store_.PurgeDelivered(kNow + 1, 10), 5);
  EXPECT_EQ(store_.PurgeDelivered(kNow + 1, 10), 0);
}

TEST_F(StoreTest, PurgeDeadTouchesOnlySelectedDeadRows) {
  const auto dead_a = Insert("a", "1");
  store_.MarkDead(Claim(dead_a), true, "x", "permanent", kNow);
  const auto dead_b = Insert("b", "1");
  store_.MarkDead(Claim(dead_b), true, "x", "permanent", kNow);
  const auto delivered = Insert("a", "2");
  store_.Complete(Claim(delivered), kNow);
  const auto pending = Insert("a", "3");

  Operator operator_actions(store_);
  RowSelector by_id;
  by_id.id = pending;  // not dead: nothing happens
  EXPECT_EQ(operator_actions.PurgeDeadBatch(by_id, 100), 0);
  RowSelector by_topic;
  by_topic.topic = "a";
  EXPECT_EQ(operator_actions.PurgeDeadBatch(by_topic, 100), 1);
  EXPECT_FALSE(store_.Get(dead_a));
  EXPECT_TRUE(store_.Get(dead_b));
  EXPECT_TRUE(store_.Get(delivered));
  EXPECT_TRUE(store_.Get(pending));
}

// A message scheduled for later is not late: only due rows give the oldest
// due time, counted from when each became due.
TEST_F(StoreTest, StatsGiveTheOldestDueTimeOfDueRowsOnly) {
  SQLite::Statement q(store_.connection(),
                      "INSERT INTO outbox(topic, msg_key, payload, created_at, deliver_at)"
                      " VALUES('a', ?, 'p', ?, ?)");
  const auto insert = [&](const char* key, std::int64_t created, std::int64_t deliver_at) {
    q.reset();
    q.bind(1, key);
    q.bind(2, created);
    q.bind(3, deliver_at);
    q.exec();
  };
  insert("later", kNow - 3 * 3'600'000, kNow + 2 * 3'600'000);  // written 3 h ago, due in 2 h
  insert("due", kNow - 10'000, kNow - 3000);                    // due 3 s ago
  Stats stats = store_.GetStats(kNow);
  ASSERT_EQ(stats.counts.size(), 1u);
  EXPECT_EQ(stats.counts[0].count, 2);
  EXPECT_EQ(stats.counts[0].oldest_created_at, kNow - 3 * 3'600'000);
  EXPECT_EQ(stats.counts[0].oldest_due_at, kNow - 3000);
  store_.connection().exec("DELETE FROM outbox WHERE msg_key = 'due'");
  stats = store_.GetStats(kNow);
  EXPECT_FALSE(stats.counts[0].oldest_due_at);
}

TEST_F(StoreTest, StatsCountPerTopicAndStatus) {
  Insert("a", "1", kNow, kNow - 5000);
  Insert("a", "2", kNow, kNow - 1000);
  store_.MarkDead(Claim(Insert("a", "3")), true, "x", "permanent", kNow);
  store_.Complete(Claim(Insert("b", "1")), kNow);
  const Stats stats = store_.GetStats();
  ASSERT_EQ(stats.counts.size(), 3u);
  EXPECT_EQ(stats.counts[0].topic, "a");
  EXPECT_EQ(stats.counts[0].status, Status::kPending);
  EXPECT_EQ(stats.counts[0].count, 2);
  EXPECT_EQ(stats.counts[0].oldest_created_at, kNow - 5000);
  EXPECT_EQ(stats.counts[0].oldest_due_at, kNow - 5000);
  EXPECT_EQ(stats.counts[1].status, Status::kDead);
  EXPECT_EQ(stats.counts[2].topic, "b");
  EXPECT_EQ(stats.counts[2].status, Status::kDelivered);
  EXPECT_EQ(stats.undelivered, 3);
  EXPECT_GT(stats.db_bytes, 0);
}

TEST_F(StoreTest, UndeliveredCounterFollowsEveryTransition) {
  const auto a = Insert("t", "a");
  const auto b = Insert("t", "b");
  EXPECT_EQ(store_.GetStats().undelivered, 2);
  store_.Complete(Claim(a), kNow);
  EXPECT_EQ(store_.GetStats().undelivered, 1);
  store_.MarkDead(Claim(b), true, "x", "permanent", kNow);
  EXPECT_EQ(store_.GetStats().undelivered, 1);
  RowSelector all;
  all.all = true;
  Operator(store_).PurgeDeadBatch(all, 10);
  store_.PurgeDelivered(kNow + 1, 10);
  EXPECT_EQ(store_.GetStats().undelivered, 0);
}

TEST_F(StoreTest, PendingTopicsListsEachTopicWithPendingRows) {
  Insert("b", "1");
  Insert("a", "1");
  Insert("a", "2");
  store_.Complete(Claim(Insert("c", "1")), kNow);
  EXPECT_EQ(store_.PendingTopics(), (std::vector<std::string>{"a", "b"}));
}

TEST_F(StoreTest, ListFiltersByStatusAndTopic) {
  Insert("a", "1");
  const auto dead = Insert("a", "2");
  store_.MarkDead(Claim(dead), true, "x", "permanent", kNow);
  Insert("b", "1");
  ListFilter filter;
  filter.status = Status::kDead;
  auto rows = store_.List(filter);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].id, dead);
  filter = ListFilter{};
  filter.topic = "a";
  EXPECT_EQ(store_.List(filter).size(), 2u);
  filter.limit = 1;
  EXPECT_EQ(store_.List(filter).size(), 1u);
}

TEST_F(StoreTest, TransitionsShareOneWriteTransaction) {
  const auto a = Insert("t", "a");
  const auto b = Insert("t", "b");
  {
    Store::WriteTransaction txn(store_);
    store_.Complete(Claim(a), kNow);
    store_.Reschedule(Claim(b), true, kNow + 1, "x", kNow);
    // Destroyed without Commit: everything rolls back together.
  }
  EXPECT_EQ(Get(a).status, Status::kPending);
  EXPECT_EQ(Get(b).attempts, 0);
  {
    Store::WriteTransaction txn(store_);
    store_.Complete(Claim(a), kNow);
    store_.Reschedule(Claim(b), true, kNow + 1, "x", kNow);
    txn.Commit();
  }
  EXPECT_EQ(Get(a).status, Status::kDelivered);
  EXPECT_EQ(Get(b).attempts, 1);
}

TEST_F(StoreTest, MaxDbBytesRefusesInserts) {
  Limits limits;
  limits.max_db_bytes = 1;  // any database is larger
  store_.SetLimits(limits);
  try {
    Insert("t", "a");
    FAIL() << "expected the trigger to refuse";
  } catch (const SQLite::Exception& e) {
    EXPECT_NE(std::string(e.what()).find("max_db_bytes"), std::string::npos);
  }
  EXPECT_THROW(store_.SetLimits(Limits{-1, 0, 0}), std::invalid_argument);
}

TEST_F(StoreTest, HostileRowValuesAreReadWithoutCrashing) {
  store_.connection().exec(
      "INSERT INTO outbox(topic, msg_key, payload, attempts, max_attempts,"
      " next_attempt_at) VALUES('t', 'k', x'00ff', -3, 999999999999, -5)");
  // The insert trigger refuses it (schema 8); rows written before it may hold it.
  store_.connection().exec("UPDATE outbox SET backoff = 'sideways' WHERE id = 1");
  const Row row = Get(1);
  EXPECT_EQ(row.attempts, -3);
  EXPECT_FALSE(row.retry.backoff);
  EXPECT_EQ(row.payload, std::string("\0\xff", 2));
  auto claimed = store_.ClaimDue("t", "me", kNow + kLease, kNow, 10);
  EXPECT_EQ(claimed.size(), 1u);
}

// Two connections on one file, as the application and the agent have.
TEST(StoreFile, RowsCommittedByAnotherConnectionAreClaimable) {
  TempDir dir;
  Options options;
  options.path = dir.File("app.db");
  options.create = true;
  Store agent(options);
  SQLite::Database app(options.path, SQLite::OPEN_READWRITE);
  Producer producer(app);
  const std::int64_t version = agent.DataVersion();
  app.exec("BEGIN IMMEDIATE");
  const auto id = producer.Enqueue({"t", "k", "payload", "", {}}).id;
  // Not visible before the commit.
  EXPECT_FALSE(agent.Get(id));
  app.exec("COMMIT");
  EXPECT_NE(agent.DataVersion(), version);
  auto claimed = agent.ClaimById(id, "agent", kNow + kLease, kNow);
  ASSERT_TRUE(claimed);
  EXPECT_EQ(claimed->row.payload, "payload");
}

TEST(StoreFile, ASecondWriterWaitsForTheFirst) {
  TempDir dir;
  Options options;
  options.path = dir.File("app.db");
  options.create = true;
  Store first(options);
  options.busy_timeout_ms = 50;
  Store second(options);
  Store::WriteTransaction hold(first);
  try {
    Store::WriteTransaction blocked(second);
    FAIL() << "expected SQLITE_BUSY";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.sqlite_code() & 0xff, 5 /* SQLITE_BUSY */);
  }
}

// Without statistics SQLite picks an index by its constraints alone. These
// statements run on every sweeper wake-up or retention pass and must seek
// their own index: any other plan walks every pending or delivered row
// (0.3 s per wake-up at 1 000 000 pending, benchmark figure 5).
TEST_F(StoreTest, SweeperAndRetentionStatementsSeekTheirOwnIndex) {
  const std::pair<const char*, const char*> expected[] = {
      {sql::kQuarantinedCount, "outbox_quarantine"},
      {sql::kQuarantinedTopics, "outbox_quarantine"},
      {sql::kClaimQuarantined, "outbox_quarantine"},
      {sql::kClaimDue, "outbox_claim (status=? AND topic=? AND next_attempt_at<?)"},
      {sql::kHasDue, "outbox_claim (status=? AND topic=? AND next_attempt_at<?)"},
      {sql::kPeekDelivered, "outbox_retention (status=? AND updated_at<?)"},
      {sql::kPurgeDelivered, "outbox_retention (status=? AND updated_at<?)"},
      // One rowid seek per lease, never outbox_claim's range of rows in flight.
      {sql::kCompleteMany, "SEARCH outbox USING INTEGER PRIMARY KEY (rowid=?)"},
  };
  for (const auto& [statement, index] : expected) {
    SQLite::Statement plan(store_.connection(), std::string("EXPLAIN QUERY PLAN ") + statement);
    std::string details;
    while (plan.executeStep()) details += plan.getColumn(3).getString() + "\n";
    EXPECT_NE(details.find(index), std::string::npos) << statement << "\n" << details;
    EXPECT_EQ(details.find("TEMP B-TREE"), std::string::npos) << statement << "\n" << details;
  }
}

// Schema 6: outbox_ordering's WHERE names delivered_at, not status, so a
// claim (pending -> in flight) does not touch it; before, every claim of a
// keyed row rewrote its entry, one index page per key (figure 8c: 2.6x the
// pass at 1 000 000 pending). SQLite opens for writing exactly the indexes
// an UPDATE may change, so the program of each statement shows it (its main
// program: trigger programs follow it, numbered from 0 again, and the
// triggers a claim fires do not change delivered_at).
TEST_F(StoreTest, ClaimsDoNotWriteTheOrderingIndexAndCompletionsDo) {
  SQLite::Statement root(store_.connection(),
                         "SELECT rootpage FROM sqlite_schema WHERE name = 'outbox_ordering'");
  ASSERT_TRUE(root.executeStep());
  const int ordering_root = root.getColumn(0).getInt();
  const auto writes_ordering = [&](const char* statement) {
    SQLite::Statement program(store_.connection(), std::string("EXPLAIN ") + statement);
    bool writes = false;
    int last_address = -1;
    while (program.executeStep() && program.getColumn(0).getInt() > last_address) {
      last_address = program.getColumn(0).getInt();
      writes = writes || (program.getColumn(1).getString() == "OpenWrite" &&
                          program.getColumn(3).getInt() == ordering_root);
    }
    return writes;
  };
  for (const char* claim : {sql::kClaimById, sql::kClaimNextOfKeys1, sql::kClaimNextOfKeys32,
                            sql::kClaimDue, sql::kClaimQuarantined}) {
    EXPECT_FALSE(writes_ordering(claim)) << claim;
  }
  for (const char* deliver :
       {sql::kComplete, sql::kCompleteMany, sql::kMarkDeliveredId, sql::kRequeueDelivered}) {
    EXPECT_TRUE(writes_ordering(deliver)) << deliver;
  }
}

// Every statement that asks "is an older row of this key undelivered" seeks
// outbox_ordering by topic and key (named with INDEXED BY: a statement whose
// WHERE does not imply the partial index's fails to prepare).
TEST_F(StoreTest, OrderingChecksSeekTheOrderingIndexByKey) {
  for (const char* statement :
       {sql::kClaimById, sql::kClaimNextOfKeys1, sql::kClaimNextOfKeys32, sql::kClaimDue,
        sql::kClaimQuarantined, sql::kHasDue, sql::kWaitsFor, sql::kBlockedKeyCount}) {
    SQLite::Statement plan(store_.connection(), std::string("EXPLAIN QUERY PLAN ") + statement);
    std::string details;
    while (plan.executeStep()) details += plan.getColumn(3).getString() + "\n";
    EXPECT_NE(details.find("USING INDEX outbox_ordering (topic=? AND ordering_key=? AND id"),
              std::string::npos)
        << statement << "\n" << details;
  }
}

// The claim of the next rows of keys finds each row through the ordering
// index and takes it by rowid; without "+status" the planner walked every
// pending row of the file (outbox_claim's status range) once per claim.
TEST_F(StoreTest, ClaimNextOfKeysTakesRowsByRowid) {
  for (const char* statement : {sql::kClaimNextOfKeys1, sql::kClaimNextOfKeys32}) {
    SQLite::Statement plan(store_.connection(), std::string("EXPLAIN QUERY PLAN ") + statement);
    std::string details;
    while (plan.executeStep()) details += plan.getColumn(3).getString() + "\n";
    EXPECT_NE(details.find("SEARCH outbox USING INTEGER PRIMARY KEY (rowid=?)"), std::string::npos)
        << details;
    EXPECT_EQ(details.find("outbox_claim"), std::string::npos) << details;
  }
}

// The sweeper parks rows behind dead heads on every full pass: it must seek
// the few dead rows that can block (outbox_dead_keyed), then each one's key,
// never walk the topic's pending rows.
TEST_F(StoreTest, ParkingSeeksTheBlockingDeadRowsAndTheirKeys) {
  EXPECT_EQ(std::to_string(kParkedAt), OUTBOX_PARKED);
  SQLite::Statement plan(store_.connection(),
                         std::string("EXPLAIN QUERY PLAN ") + sql::kParkBehindDeadHeads);
  std::string details;
  while (plan.executeStep()) details += plan.getColumn(3).getString() + "\n";
  EXPECT_NE(details.find("SEARCH h USING INDEX outbox_dead_keyed (topic=?"), std::string::npos)
      << details;
  EXPECT_NE(details.find("SEARCH s USING INDEX outbox_ordering (topic=? AND ordering_key=? AND id>?)"),
            std::string::npos)
      << details;
  EXPECT_EQ(details.find("outbox_claim"), std::string::npos) << details;
  EXPECT_EQ(details.find("SCAN"), std::string::npos) << details;
}

// The blocked-keys gauge looks at dead rows and rows not yet due of each
// ordered topic, as ranges of the claim index: never at every pending row
// (1 000 000 at scale), nor at rows parked behind a dead head (its range
// ends before the parked time).
TEST_F(StoreTest, TheBlockedKeysGaugeLeavesParkedRowsOutOfItsRange) {
  SQLite::Statement plan(store_.connection(),
                         std::string("EXPLAIN QUERY PLAN ") + sql::kBlockedKeyCount);
  std::string details;
  while (plan.executeStep()) details += plan.getColumn(3).getString() + "\n";
  EXPECT_NE(details.find("SEARCH h USING INDEX outbox_claim (status=? AND topic=?)"),
            std::string::npos)
      << details;
  EXPECT_NE(details.find("SEARCH h USING INDEX outbox_claim (status=? AND topic=? AND "
                         "next_attempt_at>? AND next_attempt_at<?)"),
            std::string::npos)
      << details;
  EXPECT_EQ(details.find("SCAN h"), std::string::npos) << details;
}

}  // namespace
}  // namespace outbox::store
