// Purging a million delivered rows gives the file back: with incremental
// vacuum and a checkpoint it ends within 1.1x of a freshly initialised one.
// Label `slow` (a million rows).
#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "../common/temp_dir.h"
#include "outbox/store.h"

namespace outbox::store {
namespace {

using outbox::testing::TempDir;

constexpr std::int64_t kNow = 1'700'000'000'000;
constexpr int kRows = 1'000'000;

TEST(PurgeSize, PurgeGivesTheFileBack) {
  TempDir dir;
  Options options;
  options.path = dir.File("app.db");
  options.create = true;
  Store store(options);
  store.SetLimits({0, 0, 0});
  store.Checkpoint();
  const auto empty = std::filesystem::file_size(options.path);
  // A million delivered rows, written the way another application would
  // (plain SQL: the trigger moves each payload), 100 bytes of payload each.
  store.connection().exec(
      "BEGIN IMMEDIATE;"
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " +
      std::to_string(kRows) +
      ")"
      " INSERT INTO outbox(topic, msg_key, payload, status, updated_at)"
      " SELECT 't', 'k' || i, randomblob(100), 1, 5 FROM n;"
      "COMMIT;");
  store.Checkpoint();
  const auto full = std::filesystem::file_size(options.path);
  ASSERT_GT(full, 100u * kRows);
  int purged = 0;
  for (int n = 0; (n = store.PurgeDelivered(kNow, 10'000)) > 0;) purged += n;
  EXPECT_EQ(purged, kRows);
  store.ReclaimFreePages();
  store.Checkpoint();
  const auto after = std::filesystem::file_size(options.path);
  SQLite::Statement left(store.connection(), "SELECT count(*) FROM outbox_payload");
  ASSERT_TRUE(left.executeStep());
  EXPECT_EQ(left.getColumn(0).getInt64(), 0);
  EXPECT_LE(static_cast<double>(after), 1.1 * static_cast<double>(empty))
      << "empty " << empty << " B, with the rows " << full << " B, after the purge " << after
      << " B";
  std::printf("purge: empty %ju B, %d rows %ju B, purged %ju B\n",
              static_cast<std::uintmax_t>(empty), kRows, static_cast<std::uintmax_t>(full),
              static_cast<std::uintmax_t>(after));
}

}  // namespace
}  // namespace outbox::store
