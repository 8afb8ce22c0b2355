// Retention with a real database: what is purged, and the archive first.
#include "retention.h"

#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>

#include <fstream>

#include "../common/temp_dir.h"

namespace outbox::agent {
namespace {

class RetentionTest : public ::testing::Test {
 protected:
  RetentionTest() {
    rt_.clock = SystemClock();
    rt_.log = std::make_shared<spdlog::logger>("test",
                                               std::make_shared<spdlog::sinks::null_sink_mt>());
    rt_.metrics = std::make_shared<Metrics>();
    rt_.owner = "test-owner";
    rt_.options.retention.delivered_ms = 60'000;
    rt_.store_options.path = dir_.File("app.db");
    rt_.store_options.create = true;
    rt_.writer = std::make_unique<Writer>(rt_.store_options, rt_.log);
    rt_.database_id = rt_.writer->database_id();
  }

  // `n` rows delivered at `delivered_at`, and one still pending.
  void Deliver(int n, std::int64_t delivered_at) {
    rt_.writer->Run([&](store::Store& s) {
      store::Producer producer(s.connection());
      for (int i = 0; i < n; ++i) {
        producer.Enqueue({"t", "k" + std::to_string(next_++), "{}", "", {}});
      }
      producer.Enqueue({"p", "pending" + std::to_string(next_++), "{}", "", {}});
      const std::int64_t now = rt_.clock->WallMs();
      for (const auto& c : s.ClaimDue("t", rt_.owner, now + 60'000, now, n)) {
        s.Complete(c.lease, delivered_at);
      }
    });
  }

  std::unique_ptr<store::Store> Reader() {
    store::Options read = rt_.store_options;
    read.create = false;
    return std::make_unique<store::Store>(read);
  }

  std::int64_t Count(store::Status status) {
    for (const auto& c : Reader()->GetStats().counts) {
      if (c.status == status) return c.count;
    }
    return 0;
  }

  outbox::testing::TempDir dir_;
  Runtime rt_;
  int next_ = 0;
};

TEST_F(RetentionTest, PurgesOnlyDeliveredRowsOlderThanTheRetention) {
  const std::int64_t now = rt_.clock->WallMs();
  Deliver(3, now - 120'000);
  Deliver(2, now - 1'000);
  Retention retention(rt_);
  auto reader = Reader();
  retention.Pass(*reader);
  EXPECT_EQ(Count(store::Status::kDelivered), 2);
  EXPECT_EQ(Count(store::Status::kPending), 2);
}

TEST_F(RetentionTest, ArchivesWhatItPurgesBeforeDeletingIt) {
  rt_.options.retention.archive_path = dir_.File("archive.jsonl");
  const std::int64_t now = rt_.clock->WallMs();
  Deliver(Retention::kBatch + 7, now - 120'000);  // more than one batch
  Retention retention(rt_);
  auto reader = Reader();
  retention.Pass(*reader);
  EXPECT_EQ(Count(store::Status::kDelivered), 0);
  std::ifstream in(rt_.options.retention.archive_path);
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  EXPECT_EQ(lines, Retention::kBatch + 7);
}

TEST_F(RetentionTest, AnArchiveThatCannotBeWrittenDeletesNothing) {
  rt_.options.retention.archive_path = dir_.File("missing/archive.jsonl");
  Deliver(3, rt_.clock->WallMs() - 120'000);
  Retention retention(rt_);
  auto reader = Reader();
  EXPECT_THROW(retention.Pass(*reader), std::runtime_error);
  EXPECT_EQ(Count(store::Status::kDelivered), 3);
}

TEST_F(RetentionTest, ZeroKeepsEverything) {
  rt_.options.retention.delivered_ms = 0;
  Deliver(3, 1);
  Retention retention(rt_);
  auto reader = Reader();
  retention.Pass(*reader);
  EXPECT_EQ(Count(store::Status::kDelivered), 3);
}

}  // namespace
}  // namespace outbox::agent
