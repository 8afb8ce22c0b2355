#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "../common/temp_dir.h"
#include "outbox/store.h"

namespace outbox::store {
namespace {

class ProducerTransactionTest : public ::testing::Test {
 protected:
  ProducerTransactionTest() : path_(dir_.File("app.db")) {
    Options init;
    init.path = path_;
    init.create = true;
    Store create(init);
    app_ = std::make_unique<SQLite::Database>(path_, SQLite::OPEN_READWRITE, 50);
    producer_ = std::make_unique<Producer>(*app_);
  }
  static NewMessage Message(std::string topic, std::string key) {
    return {std::move(topic), std::move(key), "{}", "", {}};
  }
  std::int64_t Rows() {
    SQLite::Statement q(*app_, "SELECT count(*) FROM outbox");
    q.executeStep();
    return q.getColumn(0).getInt64();
  }

  outbox::testing::TempDir dir_;
  std::string path_;
  std::unique_ptr<SQLite::Database> app_;
  std::unique_ptr<Producer> producer_;
};

TEST_F(ProducerTransactionTest, CommitReturnsTheInsertedRowsOnly) {
  ProducerTransaction txn(*producer_);
  const auto a = txn.Enqueue(Message("a", "k1"));
  const auto b = txn.Enqueue(Message("b", "k2"));
  EnqueueOptions idempotent;
  idempotent.idempotent = true;
  EXPECT_FALSE(txn.Enqueue(Message("a", "k1"), idempotent).inserted);
  const std::vector<EnqueuedRow> rows = txn.Commit();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].id, a.id);
  EXPECT_EQ(rows[0].topic, "a");
  EXPECT_EQ(rows[1].id, b.id);
  EXPECT_EQ(rows[1].topic, "b");
  EXPECT_FALSE(txn.open());
  EXPECT_THROW(txn.Commit(), std::logic_error);
  EXPECT_THROW(txn.Enqueue(Message("a", "k3")), std::logic_error);
  EXPECT_EQ(Rows(), 2);
}

TEST_F(ProducerTransactionTest, DestroyedUncommittedItRollsBack) {
  {
    ProducerTransaction txn(*producer_);
    txn.Enqueue(Message("a", "k1"));
  }
  EXPECT_EQ(Rows(), 0);
  ProducerTransaction txn(*producer_);
  txn.Enqueue(Message("a", "k1"));
  txn.Rollback();
  txn.Rollback();  // a second one does nothing
  EXPECT_EQ(Rows(), 0);
}

TEST_F(ProducerTransactionTest, ABusyDatabaseIsAStoreErrorThatSaysBusy) {
  SQLite::Database other(path_, SQLite::OPEN_READWRITE);
  other.exec("BEGIN IMMEDIATE");
  try {
    ProducerTransaction txn(*producer_);
    FAIL() << "no error";
  } catch (const StoreError& e) {
    EXPECT_TRUE(e.busy()) << e.what();
    EXPECT_FALSE(e.full());
    EXPECT_EQ(e.kind(), StoreError::Kind::kBusy);
  }
  other.exec("ROLLBACK");
}

TEST(StoreErrorKind, TellsBusyFullAndOtherApart) {
  EXPECT_EQ(StoreError("x", 5).kind(), StoreError::Kind::kBusy);       // SQLITE_BUSY
  EXPECT_EQ(StoreError("x", 261).kind(), StoreError::Kind::kBusy);     // SQLITE_BUSY_RECOVERY
  EXPECT_EQ(StoreError("x", 6).kind(), StoreError::Kind::kBusy);       // SQLITE_LOCKED
  EXPECT_EQ(StoreError("x", 13).kind(), StoreError::Kind::kFull);      // SQLITE_FULL
  EXPECT_EQ(StoreError("x", 11).kind(), StoreError::Kind::kOther);     // SQLITE_CORRUPT
  EXPECT_EQ(StoreError("x", 0).kind(), StoreError::Kind::kOther);
}

TEST_F(ProducerTransactionTest, CheckpointEmptiesTheWal) {
  Options options;
  options.path = path_;
  Store store(options);
  ProducerTransaction txn(*producer_);
  txn.Enqueue(Message("a", "k1"));
  txn.Commit();
  ASSERT_GT(std::filesystem::file_size(path_ + "-wal"), 0u);
  store.Checkpoint();
  EXPECT_EQ(std::filesystem::file_size(path_ + "-wal"), 0u);
  store.ReclaimFreePages();
}

}  // namespace
}  // namespace outbox::store
