// A purge gives back, in its own transaction, the pages it empties when they
// fit in one step of incremental vacuum, so that they are not written to the
// write-ahead log only to be freed (docs/performance.md, "Bytes written per
// message": the purge of a 256-byte message went from 453 to 58 bytes).
#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../common/temp_dir.h"
#include "outbox/store.h"

namespace outbox::store {
namespace {

using outbox::testing::TempDir;

constexpr std::int64_t kNow = 1'700'000'000'000;
constexpr int kRows = 500;

std::int64_t Pragma(Store& store, const std::string& name) {
  SQLite::Statement q(store.connection(), "PRAGMA " + name);
  EXPECT_TRUE(q.executeStep());
  return q.getColumn(0).getInt64();
}

Options FileAt(const std::string& path) {
  Options options;
  options.path = path;
  options.create = true;
  return options;
}

// Delivered rows of `payload` bytes, written as plain SQL would, then
// checkpointed: the log starts empty.
void Fill(Store& store, int rows = kRows, int payload = 256) {
  store.SetLimits({0, 0, 0});
  store.connection().exec(
      "BEGIN IMMEDIATE;"
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " +
      std::to_string(rows) +
      ")"
      " INSERT INTO outbox(topic, msg_key, payload, status, updated_at)"
      " SELECT 't', 'k' || i, randomblob(" +
      std::to_string(payload) +
      "), 1, 5 FROM n;"
      "COMMIT;");
  store.Checkpoint();
}

std::int64_t FramesInLog(Store& store, const std::string& path) {
  const auto bytes = static_cast<std::int64_t>(std::filesystem::file_size(path + "-wal"));
  return bytes <= 32 ? 0 : (bytes - 32) / (Pragma(store, "page_size") + 24);
}

TEST(PurgePages, APurgeWritesNotThePagesItEmpties) {
  TempDir dir;
  const std::string path = dir.File("app.db");
  Store store(FileAt(path));
  const std::int64_t empty = Pragma(store, "page_count");
  Fill(store);
  const std::int64_t rows_pages = Pragma(store, "page_count") - empty;
  ASSERT_GE(rows_pages, 40);
  ASSERT_EQ(FramesInLog(store, path), 0);

  EXPECT_EQ(store.PurgeDelivered(kNow, 1000), kRows);

  // The rows' pages are off the file, and few reached the log: in a
  // transaction of their own, the delete wrote every one of them.
  EXPECT_EQ(Pragma(store, "page_count"), empty);
  EXPECT_EQ(Pragma(store, "freelist_count"), 0);
  EXPECT_LT(FramesInLog(store, path), rows_pages / 4) << rows_pages << " pages of rows";
}

TEST(PurgePages, DeletingArchivedRowsGivesTheirPagesBackToo) {
  TempDir dir;
  const std::string path = dir.File("app.db");
  Store store(FileAt(path));
  const std::int64_t empty = Pragma(store, "page_count");
  Fill(store);
  const std::int64_t rows_pages = Pragma(store, "page_count") - empty;
  std::vector<std::int64_t> ids;
  for (const Row& row : store.PeekDelivered(kNow, 1000)) ids.push_back(row.id);
  store.Checkpoint();

  EXPECT_EQ(store.DeleteDelivered(ids), kRows);

  EXPECT_EQ(Pragma(store, "page_count"), empty);
  EXPECT_EQ(Pragma(store, "freelist_count"), 0);
  EXPECT_LT(FramesInLog(store, path), rows_pages / 4) << rows_pages << " pages of rows";
}

// More free pages than a step are left to ReclaimFreePages: a step inside
// the purge would move pages from the file's end that a next batch may free.
TEST(PurgePages, ManyFreedPagesAreLeftToReclaimFreePages) {
  TempDir dir;
  Store store(FileAt(dir.File("app.db")));
  const std::int64_t empty = Pragma(store, "page_count");
  Fill(store, 100, 8192);
  const std::int64_t full = Pragma(store, "page_count");

  EXPECT_EQ(store.PurgeDelivered(kNow, 1000), 100);
  EXPECT_GT(Pragma(store, "freelist_count"), 128);
  EXPECT_EQ(Pragma(store, "page_count"), full);  // nothing given back, nothing moved

  store.ReclaimFreePages();
  EXPECT_EQ(Pragma(store, "freelist_count"), 0);
  EXPECT_EQ(Pragma(store, "page_count"), empty);
}

}  // namespace
}  // namespace outbox::store
