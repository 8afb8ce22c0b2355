// The operator's console in the store: filtered lists with keyset cursors,
// bounded scans, bulk actions by filter with a confirmed count, the overview
// and the audit pages.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "outbox/store.h"

namespace outbox::store {
namespace {

constexpr std::int64_t kNow = 1'780'000'000'000;

class ConsoleTest : public ::testing::Test {
 protected:
  ConsoleTest() : store_(Memory()), operator_(store_) {}

  static Options Memory() {
    Options options;
    options.path = ":memory:";
    options.create = true;
    return options;
  }

  std::int64_t Insert(const std::string& topic, const std::string& key, Status status,
                      const std::string& error = "", std::int64_t due = kNow) {
    SQLite::Statement q(store_.connection(),
                        "INSERT INTO outbox(topic, msg_key, payload, status, created_at,"
                        " updated_at, next_attempt_at, last_error, dead_reason)"
                        " VALUES(?, ?, 'p', ?, ?, ?, ?, ?, ?)");
    q.bind(1, topic);
    q.bind(2, key);
    q.bind(3, static_cast<int>(status));
    q.bind(4, kNow);
    q.bind(5, kNow);
    q.bind(6, due);
    if (error.empty()) {
      q.bind(7);
    } else {
      q.bind(7, error);
    }
    if (status == Status::kDead) {
      q.bind(8, "attempts");
    } else {
      q.bind(8);
    }
    q.exec();
    return store_.connection().getLastInsertRowid();
  }

  // Every page of `query`, concatenated (ids in list order).
  std::vector<std::int64_t> AllPages(const MessageQuery& query, PageRequest page,
                                     int* pages = nullptr) {
    std::vector<std::int64_t> ids;
    int count = 0;
    do {
      const MessagePage result = operator_.ListMessages(query, page);
      for (const Row& row : result.rows) ids.push_back(row.id);
      page.cursor = result.next_cursor;
      ++count;
    } while (!page.cursor.empty() && count < 10'000);
    if (pages != nullptr) *pages = count;
    return ids;
  }

  std::int64_t AuditRows(const std::string& where) {
    SQLite::Statement q(store_.connection(), "SELECT count(*) FROM outbox_audit WHERE " + where);
    q.executeStep();
    return q.getColumn(0).getInt64();
  }

  const Actor actor_{"ops-token", "admin api"};
  Store store_;
  Operator operator_;
};

TEST_F(ConsoleTest, StatusPagesShowEveryRowOnceWhileRowsAreInserted) {
  std::set<std::int64_t> expected;
  for (int i = 0; i < 30; ++i) {
    expected.insert(Insert(i % 2 ? "b" : "a", "k" + std::to_string(i), Status::kDead));
  }
  Insert("a", "pending", Status::kPending);
  MessageQuery query;
  query.status = Status::kDead;
  PageRequest page;
  page.limit = 7;
  std::vector<std::int64_t> seen;
  int inserted = 0;
  do {
    const MessagePage result = operator_.ListMessages(query, page);
    for (const Row& row : result.rows) {
      EXPECT_EQ(row.status, Status::kDead);
      seen.push_back(row.id);
    }
    // New rows between pages, some sorting before the cursor, some after.
    Insert(inserted % 2 ? "a" : "z", "new" + std::to_string(inserted), Status::kDead, "",
           inserted % 2 ? kNow - 1000 : kNow + 1000);
    ++inserted;
    page.cursor = result.next_cursor;
  } while (!page.cursor.empty());
  const std::set<std::int64_t> unique(seen.begin(), seen.end());
  EXPECT_EQ(unique.size(), seen.size()) << "a row was shown twice";
  for (std::int64_t id : expected) EXPECT_TRUE(unique.count(id)) << "row " << id << " skipped";
}

TEST_F(ConsoleTest, TopicAndKeyPrefixListInKeyOrderAndStopAtThePrefixEnd) {
  Insert("orders", "eu-2", Status::kPending);
  Insert("orders", "eu-1", Status::kDead);
  Insert("orders", "eu-", Status::kPending);
  Insert("orders", "eu.", Status::kPending);  // '.' sorts right after '-'
  Insert("orders", "us-1", Status::kPending);
  Insert("other", "eu-3", Status::kPending);
  Insert("orders", "\xff\xff", Status::kPending);
  MessageQuery query;
  query.topic = "orders";
  query.key_prefix = "eu-";
  PageRequest page;
  page.limit = 2;
  std::vector<std::string> keys;
  do {
    const MessagePage result = operator_.ListMessages(query, page);
    for (const Row& row : result.rows) keys.push_back(row.key);
    page.cursor = result.next_cursor;
  } while (!page.cursor.empty());
  EXPECT_EQ(keys, (std::vector<std::string>{"eu-", "eu-1", "eu-2"}));

  query.key_prefix = "\xff";
  EXPECT_EQ(AllPages(query, page).size(), 1U);
  query.key_prefix.reset();
  query.key = "eu-1";
  EXPECT_EQ(AllPages(query, page).size(), 1U);
}

TEST_F(ConsoleTest, UnindexedFiltersScanABoundedNumberOfRowsAndHandBackACursor) {
  std::vector<std::int64_t> wanted;
  for (int i = 0; i < 100; ++i) {
    const bool match = i % 40 == 5;
    const std::int64_t id = Insert("t", "k" + std::to_string(i), Status::kDead,
                                   match ? "HTTP 503 from Collector" : "timeout");
    if (match) wanted.insert(wanted.begin(), id);  // newest first
  }
  MessageQuery query;
  query.error_text = "collector";
  PageRequest page;
  page.limit = 10;
  page.max_scan = 10;
  const MessagePage first = operator_.ListMessages(query, page);
  EXPECT_EQ(first.scanned, 10);
  EXPECT_FALSE(first.next_cursor.empty());
  int pages = 0;
  EXPECT_EQ(AllPages(query, page, &pages), wanted);
  EXPECT_GE(pages, 10);
}

TEST_F(ConsoleTest, ACursorOfAnotherFilterOrAForgedOneIsRefused) {
  for (int i = 0; i < 5; ++i) Insert("t", "k" + std::to_string(i), Status::kDead);
  MessageQuery by_status;
  by_status.status = Status::kDead;
  PageRequest page;
  page.limit = 2;
  page.cursor = operator_.ListMessages(by_status, page).next_cursor;
  MessageQuery by_topic;
  by_topic.topic = "t";
  EXPECT_THROW(operator_.ListMessages(by_topic, page), std::invalid_argument);
  page.cursor = "s.zz.00.1.2";
  EXPECT_THROW(operator_.ListMessages(by_status, page), std::invalid_argument);
  page.cursor = "garbage";
  EXPECT_THROW(operator_.ListMessages(by_status, page), std::invalid_argument);
}

TEST_F(ConsoleTest, BadQueriesAreRefusedNamingTheField) {
  MessageQuery query;
  query.dead_reason = "bored";
  EXPECT_THROW(operator_.ListMessages(query, {}), std::invalid_argument);
  query = {};
  query.created_from = kNow;
  query.created_until = kNow;
  EXPECT_THROW(operator_.ListMessages(query, {}), std::invalid_argument);
  query = {};
  query.topic = "";
  EXPECT_THROW(operator_.ListMessages(query, {}), std::invalid_argument);
  PageRequest page;
  page.limit = 0;
  EXPECT_THROW(operator_.ListMessages({}, page), std::invalid_argument);
}

TEST_F(ConsoleTest, BulkRetryActsOnThePreviewedRowsWithOneAuditRowEach) {
  std::vector<std::int64_t> dead;
  for (int i = 0; i < 4; ++i) {
    dead.push_back(Insert("orders", "k" + std::to_string(i), Status::kDead, "HTTP 400"));
  }
  Insert("orders", "other-error", Status::kDead, "HTTP 500");
  Insert("orders", "pending", Status::kPending, "HTTP 400");
  Insert("other", "k", Status::kDead, "HTTP 400");
  MessageQuery query;
  query.topic = "orders";
  query.error_text = "http 400";
  const BulkCount preview = operator_.CountForAction(BulkAction::kRetry, query);
  EXPECT_EQ(preview.matched, 4);

  const BulkResult result =
      operator_.ApplyToMatching(BulkAction::kRetry, query, {preview.matched, 0}, actor_, kNow);
  EXPECT_TRUE(result.applied);
  EXPECT_EQ(result.changed, 4);
  for (std::int64_t id : dead) {
    EXPECT_EQ(store_.Get(id)->status, Status::kPending);
    EXPECT_EQ(AuditRows("row_id = " + std::to_string(id) +
                        " AND actor = 'ops-token' AND action = 'retry' AND rows = 1"),
              1);
  }
  EXPECT_EQ(AuditRows("1"), 4);
  EXPECT_EQ(operator_.AuditPage(0, 10, dead[0]).size(), 1U);
  EXPECT_EQ(operator_.AuditPage(0, 10).front().detail, "topic=orders error_text=http 400");
}

TEST_F(ConsoleTest, BulkActionIsRefusedWhenTheCountMovedBeyondTheTolerance) {
  for (int i = 0; i < 3; ++i) Insert("orders", "k" + std::to_string(i), Status::kPending);
  MessageQuery query;
  query.topic = "orders";
  const BulkCount preview = operator_.CountForAction(BulkAction::kCancel, query);
  EXPECT_EQ(preview.matched, 3);
  Insert("orders", "k3", Status::kPending);
  Insert("orders", "k4", Status::kPending);
  const BulkResult refused =
      operator_.ApplyToMatching(BulkAction::kCancel, query, {preview.matched, 1}, actor_, kNow);
  EXPECT_FALSE(refused.applied);
  EXPECT_EQ(refused.count.matched, 5);
  EXPECT_EQ(refused.changed, 0);
  EXPECT_EQ(AuditRows("1"), 0);
  MessageQuery dead;
  dead.status = Status::kDead;
  EXPECT_EQ(operator_.CountForAction(BulkAction::kRetry, dead).matched, 0);

  const BulkResult applied =
      operator_.ApplyToMatching(BulkAction::kCancel, query, {preview.matched, 2}, actor_, kNow);
  EXPECT_TRUE(applied.applied);
  EXPECT_EQ(applied.changed, 5);
}

TEST_F(ConsoleTest, BulkActionsLeaveRowsInFlightAloneAndCountThem) {
  Insert("orders", "a", Status::kPending);
  Insert("orders", "b", Status::kInFlight);
  MessageQuery query;
  query.topic = "orders";
  const BulkCount count = operator_.CountForAction(BulkAction::kMarkDelivered, query);
  EXPECT_EQ(count.matched, 1);
  EXPECT_EQ(count.in_flight, 1);
  EXPECT_EQ(operator_.ApplyToMatching(BulkAction::kMarkDelivered, query, {1, 0}, actor_, kNow)
                .changed,
            1);
}

TEST_F(ConsoleTest, OverviewCountsEachTopicsRows) {
  Insert("a", "due", Status::kPending, "", kNow - 5000);
  Insert("a", "later", Status::kPending, "", kNow + 5000);
  Insert("a", "sending", Status::kInFlight);
  Insert("a", "dead", Status::kDead);
  Insert("b", "done", Status::kDelivered);
  const std::vector<TopicOverview> topics = operator_.Overview(kNow);
  ASSERT_EQ(topics.size(), 2U);
  EXPECT_EQ(topics[0].topic, "a");
  EXPECT_EQ(topics[0].pending, 2);
  EXPECT_EQ(topics[0].due, 1);
  EXPECT_EQ(topics[0].scheduled, 1);
  EXPECT_EQ(topics[0].in_flight, 1);
  EXPECT_EQ(topics[0].dead, 1);
  EXPECT_EQ(topics[0].oldest_due_age_ms, 5000);
  EXPECT_EQ(topics[1].topic, "b");
  EXPECT_EQ(topics[1].delivered_last_minute, 1);
}

}  // namespace
}  // namespace outbox::store
