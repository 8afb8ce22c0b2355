// Operator actions: what they change, what they refuse, and the one audit
// row each leaves.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "outbox/store.h"

namespace outbox::store {
namespace {

constexpr std::int64_t kNow = 1'780'000'000'000;
constexpr std::int64_t kHour = 3'600'000;

class OperatorTest : public ::testing::Test {
 protected:
  OperatorTest() : store_(Memory()), operator_(store_) {}

  static Options Memory() {
    Options options;
    options.path = ":memory:";
    options.create = true;
    return options;
  }

  std::int64_t Insert(const std::string& topic, const std::string& key, Status status,
                      std::int64_t created = kNow) {
    SQLite::Statement q(store_.connection(),
                        "INSERT INTO outbox(topic, msg_key, payload, status, created_at,"
                        " updated_at) VALUES(?, ?, 'p', ?, ?, ?)");
    q.bind(1, topic);
    q.bind(2, key);
    q.bind(3, static_cast<int>(status));
    q.bind(4, created);
    q.bind(5, created);
    q.exec();
    return store_.connection().getLastInsertRowid();
  }

  Row Get(std::int64_t id) { return *store_.Get(id); }

  std::optional<std::string> DeadReason(std::int64_t id) {
    SQLite::Statement q(store_.connection(), "SELECT dead_reason FROM outbox WHERE id = ?");
    q.bind(1, id);
    q.executeStep();
    if (q.getColumn(0).isNull()) return std::nullopt;
    return q.getColumn(0).getString();
  }

  static RowSelector ById(std::int64_t id) {
    RowSelector selector;
    selector.id = id;
    return selector;
  }

  const Actor actor_{"alice", "edge-7"};
  Store store_;
  Operator operator_;
};

TEST_F(OperatorTest, CancelMakesPendingAndDeadRowsCancelledAndLeavesOneAuditRow) {
  const std::int64_t pending = Insert("orders", "k1", Status::kPending);
  const std::int64_t dead = Insert("orders", "k2", Status::kDead);
  const std::int64_t delivered = Insert("orders", "k3", Status::kDelivered);
  RowSelector selector;
  selector.topic = "orders";
  selector.status = Status::kPending;
  selector.created_before = kNow + 1;
  EXPECT_EQ(operator_.Cancel(selector, actor_, kNow + 5), 1);
  EXPECT_EQ(operator_.Cancel(ById(dead), actor_, kNow + 6), 1);
  EXPECT_EQ(operator_.Cancel(ById(delivered), actor_, kNow + 7), 0);
  for (std::int64_t id : {pending, dead}) {
    EXPECT_EQ(Get(id).status, Status::kDead);
    EXPECT_EQ(Get(id).last_error, "cancelled by operator");
    EXPECT_EQ(DeadReason(id), "cancelled");
  }
  EXPECT_EQ(Get(delivered).status, Status::kDelivered);
  const std::vector<AuditEntry> audit = operator_.Audit(0, 100);
  ASSERT_EQ(audit.size(), 3u);
  EXPECT_EQ(audit[0].actor, "alice");
  EXPECT_EQ(audit[0].host, "edge-7");
  EXPECT_EQ(audit[0].action, "cancel");
  EXPECT_EQ(audit[0].rows, 1);
  EXPECT_EQ(audit[0].at, kNow + 5);
  EXPECT_NE(audit[0].detail.find("topic=orders"), std::string::npos) << audit[0].detail;
  EXPECT_EQ(audit[1].row_id, dead);
  EXPECT_EQ(audit[2].rows, 0);
}

TEST_F(OperatorTest, MarkDeliveredByTopicAndKeyTouchesThatRowOnly) {
  const std::int64_t k1 = Insert("orders", "k1", Status::kDead);
  const std::int64_t k2 = Insert("orders", "k2", Status::kDead);
  const std::int64_t other = Insert("refunds", "k1", Status::kDead);
  RowSelector selector;
  selector.topic = "orders";
  selector.key = "k1";
  EXPECT_EQ(operator_.MarkDelivered(selector, actor_, kNow), 1);
  EXPECT_EQ(Get(k1).status, Status::kDelivered);
  EXPECT_EQ(Get(k2).status, Status::kDead);
  EXPECT_EQ(Get(other).status, Status::kDead);
  EXPECT_EQ(operator_.Audit(0, 10).at(0).action, "mark-delivered");
}

TEST_F(OperatorTest, ActionsRefuseRowsInFlightAndChangeNothing) {
  const std::int64_t pending = Insert("orders", "k1", Status::kPending);
  const std::int64_t leased = Insert("orders", "k2", Status::kPending);
  ASSERT_TRUE(store_.ClaimById(leased, "agent", kNow + kHour, kNow));
  RowSelector topic;
  topic.topic = "orders";
  topic.status = Status::kPending;  // the leased row is not pending, but by id it is chosen
  EXPECT_EQ(operator_.Cancel(topic, actor_, kNow), 1);
  EXPECT_EQ(Get(pending).status, Status::kDead);
  EXPECT_THROW(operator_.Cancel(ById(leased), actor_, kNow), InFlightError);
  EXPECT_THROW(operator_.MarkDelivered(ById(leased), actor_, kNow), InFlightError);
  RowSelector whole_topic;
  whole_topic.topic = "orders";
  EXPECT_THROW(operator_.MarkDelivered(whole_topic, actor_, kNow), InFlightError);
  EXPECT_EQ(Get(leased).status, Status::kInFlight);
  EXPECT_EQ(Get(pending).status, Status::kDead);  // the refused bulk action changed nothing
  EXPECT_EQ(operator_.Audit(0, 10).size(), 1u);  // refusals are not actions
}

TEST_F(OperatorTest, OlderThanSelectsByCreationTime) {
  const std::int64_t old_row = Insert("orders", "old", Status::kPending, kNow - 2 * kHour);
  const std::int64_t new_row = Insert("orders", "new", Status::kPending, kNow);
  RowSelector selector;
  selector.topic = "orders";
  selector.status = Status::kPending;
  selector.created_before = kNow - kHour;
  EXPECT_EQ(operator_.SelectIds(selector, 10), std::vector<std::int64_t>{old_row});
  EXPECT_EQ(operator_.Cancel(selector, actor_, kNow), 1);
  EXPECT_EQ(Get(new_row).status, Status::kPending);
}

TEST_F(OperatorTest, RetryAndPurgeDeadByKey) {
  const std::int64_t k1 = Insert("orders", "k1", Status::kDead);
  const std::int64_t k2 = Insert("orders", "k2", Status::kDead);
  RowSelector one;
  one.topic = "orders";
  one.key = "k1";
  EXPECT_EQ(operator_.Retry(one, actor_, kNow), 1);
  EXPECT_EQ(Get(k1).status, Status::kPending);
  EXPECT_EQ(Get(k1).operator_retries, 1);
  RowSelector all;
  all.all = true;
  all.status = Status::kDead;
  EXPECT_EQ(operator_.PurgeDeadBatch(all, 10), 1);
  EXPECT_FALSE(store_.Get(k2));
  EXPECT_TRUE(store_.Get(k1));
}

TEST_F(OperatorTest, RequeueAndMarkDeliveredIdsAreOneAuditRowEach) {
  const std::int64_t a = Insert("t", "a", Status::kDelivered);
  const std::int64_t b = Insert("t", "b", Status::kDelivered);
  const std::int64_t c = Insert("t", "c", Status::kPending);
  const std::vector<std::int64_t> lost{a, b};
  EXPECT_EQ(operator_.Requeue(lost, actor_, "reconcile-requeue-missing", kNow), 2);
  EXPECT_EQ(Get(a).status, Status::kPending);
  EXPECT_EQ(Get(a).attempts, 0);
  const std::vector<std::int64_t> applied{c};
  EXPECT_EQ(operator_.MarkDeliveredIds(applied, actor_, "reconcile-mark-applied", kNow), 1);
  EXPECT_EQ(Get(c).status, Status::kDelivered);
  const auto audit = operator_.Audit(0, 10);
  ASSERT_EQ(audit.size(), 2u);
  EXPECT_EQ(audit[0].rows, 2);
  EXPECT_EQ(audit[1].row_id, c);
}

TEST_F(OperatorTest, SelectorsMustHaveExactlyOneForm) {
  RowSelector none;
  EXPECT_THROW(operator_.Cancel(none, actor_, kNow), std::invalid_argument);
  RowSelector key_alone;
  key_alone.all = true;
  key_alone.key = "k";
  EXPECT_THROW(operator_.Cancel(key_alone, actor_, kNow), std::invalid_argument);
  RowSelector two = ById(1);
  two.topic = "t";
  EXPECT_THROW(operator_.MarkDelivered(two, actor_, kNow), std::invalid_argument);
}

TEST_F(OperatorTest, AuditSinceFiltersByTime) {
  operator_.RecordAudit(actor_, "purge-delivered", 5, std::nullopt, "", kNow - kHour);
  operator_.RecordAudit(actor_, "purge-dead", 2, std::nullopt, "all=true", kNow);
  const auto recent = operator_.Audit(kNow - 1, 10);
  ASSERT_EQ(recent.size(), 1u);
  EXPECT_EQ(recent[0].action, "purge-dead");
  EXPECT_EQ(recent[0].rows, 2);
}

}  // namespace
}  // namespace outbox::store
