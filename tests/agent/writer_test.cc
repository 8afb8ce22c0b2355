#include "writer.h"

#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>

#include <future>
#include <mutex>

#include "../common/temp_dir.h"

namespace outbox::agent {
namespace {

using namespace std::chrono_literals;

class WriterTest : public ::testing::Test {
 protected:
  WriterTest() {
    options_.path = dir_.File("app.db");
    options_.create = true;
  }
  std::shared_ptr<spdlog::logger> Logger() {
    return std::make_shared<spdlog::logger>("test",
                                            std::make_shared<spdlog::sinks::null_sink_mt>());
  }
  // Blocks the writer thread inside a Run until `release` is set, so that a
  // test can queue changes that then share one transaction.
  std::future<void> BlockWriter(Writer& writer, std::shared_future<void> release) {
    std::promise<void> entered;
    auto in = entered.get_future();
    auto running = std::async(std::launch::async, [&writer, release, &entered] {
      writer.Run([&](store::Store&) {
        entered.set_value();
        release.wait();
      });
    });
    in.wait();
    return running;
  }

  outbox::testing::TempDir dir_;
  store::Options options_;
};

TEST_F(WriterTest, RunWaitsForTheCommitAndRethrowsTheTaskError) {
  Writer writer(options_, Logger());
  EXPECT_EQ(writer.database_id().size(), 32u);
  store::Limits limits;
  limits.max_pending = 7;
  writer.Run([&](store::Store& s) { s.SetLimits(limits); });
  store::Options read = options_;
  read.create = false;
  EXPECT_EQ(store::Store(read).GetLimits().max_pending, 7);
  EXPECT_THROW(writer.Run([](store::Store&) { throw std::runtime_error("boom"); }),
               std::runtime_error);
  writer.Run([](store::Store&) {});  // still working
}

TEST_F(WriterTest, ChangesQueuedMeanwhileShareOneTransaction) {
  Writer writer(options_, Logger());
  std::promise<void> release;
  auto blocked = BlockWriter(writer, release.get_future().share());
  const std::int64_t before = writer.transactions();
  std::mutex mutex;
  std::vector<int> order;
  for (int i = 0; i < 50; ++i) {
    writer.Submit({[](store::Store& s) { s.GetLimits(); },
                   [&, i] {
                     std::lock_guard lock(mutex);
                     order.push_back(i);
                   }});
  }
  release.set_value();
  blocked.get();
  writer.Run([](store::Store&) {});
  // The blocked Run, then the 50 (and perhaps the last Run with them).
  EXPECT_LE(writer.transactions() - before, 3);
  std::lock_guard lock(mutex);
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
}

TEST_F(WriterTest, PlainCompletionsAreRecordedBeforeTheNextChangeInQueueOrder) {
  Writer writer(options_, Logger());
  constexpr std::int64_t kNow = 1'700'000'000'000;
  std::vector<store::Claimed> claimed;
  writer.Run([&](store::Store& s) {
    for (int i = 0; i < 6; ++i) {
      s.connection().exec(
          "INSERT INTO outbox(topic, msg_key, payload, next_attempt_at) VALUES('t', 'k" +
          std::to_string(i) + "', 'x', " + std::to_string(kNow) + ")");
    }
    claimed = s.ClaimDue("t", "me", kNow + 60'000, kNow, 10);
  });
  ASSERT_EQ(claimed.size(), 6u);
  std::promise<void> release;
  auto blocked = BlockWriter(writer, release.get_future().share());
  const auto complete = [&](std::size_t i, std::int64_t token_offset) {
    Writer::Task task;
    task.deferrable = true;
    const store::Lease lease = claimed[i].lease;
    task.complete = store::DeliveredLease{{lease.id, lease.token + token_offset},
                                          kNow + 10 + static_cast<std::int64_t>(i)};
    writer.Submit(std::move(task));
  };
  complete(0, 0);
  complete(1, 0);
  complete(2, 0);
  int delivered_before_change = -1;
  writer.Submit({[&](store::Store& s) {
                   delivered_before_change =
                       s.connection()
                           .execAndGet("SELECT count(*) FROM outbox WHERE status = 1")
                           .getInt();
                 },
                 {}});
  complete(3, 0);
  complete(4, 1);  // a stale lease: nothing changes
  complete(5, 0);
  release.set_value();
  blocked.get();
  writer.Run([&](store::Store& s) {
    for (std::size_t i = 0; i < claimed.size(); ++i) {
      const store::Row row = *s.Get(claimed[i].lease.id);
      EXPECT_EQ(row.status, i == 4 ? store::Status::kInFlight : store::Status::kDelivered) << i;
      if (i != 4) {
        EXPECT_EQ(row.updated_at, kNow + 10 + static_cast<std::int64_t>(i)) << i;
      }
    }
  });
  EXPECT_EQ(delivered_before_change, 3);
}

// Records what the writer asks and hands over; claims through the store.
class RecordingSuccessors : public SuccessorClaims {
 public:
  std::vector<store::Claimed> Claim(store::Store& s, const std::string& topic,
                                    std::span<const std::string> keys) override {
    asked.emplace_back(keys.begin(), keys.end());
    return s.ClaimNextOfKeys(topic, keys, "me", kNow + 60'000, kNow);
  }
  void HandOver(std::vector<store::Claimed> claimed) override {
    std::lock_guard lock(mutex);
    handed_over.push_back(std::move(claimed));
  }
  static constexpr std::int64_t kNow = 1'700'000'000'000;
  std::vector<std::vector<std::string>> asked;  // on the writer thread
  std::mutex mutex;
  std::vector<std::vector<store::Claimed>> handed_over;
};

// Two rows of each key on an ordered topic, the heads claimed.
struct KeyedRows {
  std::vector<store::Claimed> heads;
  std::vector<std::int64_t> next_ids;  // the second row of each key
};
KeyedRows TwoRowsPerKey(Writer& writer, std::initializer_list<const char*> keys) {
  constexpr std::int64_t kNow = RecordingSuccessors::kNow;
  KeyedRows rows;
  writer.Run([&](store::Store& s) {
    s.AgreeOrdering("t", {true, store::DeadHead::kBlock}, kNow);
    for (int round = 0; round < 2; ++round) {
      for (const char* key : keys) {
        s.connection().exec(
            "INSERT INTO outbox(topic, msg_key, payload, ordering_key, next_attempt_at)"
            " VALUES('t', '" + std::string(key) + std::to_string(round) + "', 'x', '" + key +
            "', " + std::to_string(kNow) + ")");
        if (round == 1) rows.next_ids.push_back(s.connection().getLastInsertRowid());
      }
    }
    rows.heads = s.ClaimDue("t", "me", kNow + 60'000, kNow, 10);
  });
  return rows;
}

// The completion of `head` that claims its key's next row.
void SubmitCompletion(Writer& writer, SuccessorClaims& successors, const store::Claimed& head) {
  Writer::Task task;
  task.deferrable = true;
  task.complete = store::DeliveredLease{head.lease, RecordingSuccessors::kNow};
  task.claim_next = NextOfKey{&successors, "t", *head.row.ordering_key};
  writer.Submit(std::move(task));
}

// Per-key ordering: the completions of a group claim their keys' next rows
// with one claim after them, handed over once committed; a change queued
// between completions sees the successors of those before it claimed.
TEST_F(WriterTest, OrderedCompletionsClaimTheirKeysNextRowsTogetherInQueueOrder) {
  Writer writer(options_, Logger());
  const KeyedRows rows = TwoRowsPerKey(writer, {"a", "b", "c"});
  const std::vector<store::Claimed>& heads = rows.heads;
  const std::vector<std::int64_t>& next_ids = rows.next_ids;
  ASSERT_EQ(heads.size(), 3u);
  RecordingSuccessors successors;
  std::promise<void> release;
  auto blocked = BlockWriter(writer, release.get_future().share());
  const auto complete = [&](std::size_t i) { SubmitCompletion(writer, successors, heads[i]); };
  complete(0);
  int in_flight_at_change = -1;
  writer.Submit({[&](store::Store& s) {
                   in_flight_at_change =
                       s.connection()
                           .execAndGet("SELECT count(*) FROM outbox WHERE status = 3")
                           .getInt();
                 },
                 {}});
  complete(1);
  complete(2);
  release.set_value();
  blocked.get();
  writer.Run([](store::Store&) {});
  // a's successor was claimed before the change ran (b and c still in flight).
  EXPECT_EQ(in_flight_at_change, 3);
  EXPECT_EQ(successors.asked,
            (std::vector<std::vector<std::string>>{{"a"}, {"b", "c"}}));
  std::lock_guard lock(successors.mutex);
  ASSERT_EQ(successors.handed_over.size(), 1u);
  std::vector<std::int64_t> ids;
  for (const auto& c : successors.handed_over.front()) ids.push_back(c.lease.id);
  EXPECT_EQ(ids, next_ids);
}

// A group that fails is redone item by item: the successors claimed in the
// rolled-back attempt are not handed over, each key's next row goes once.
TEST_F(WriterTest, AFailedGroupHandsOverEachSuccessorOnceFromItsRedo) {
  Writer writer(options_, Logger());
  const KeyedRows rows = TwoRowsPerKey(writer, {"a", "b"});
  const std::vector<store::Claimed>& heads = rows.heads;
  const std::vector<std::int64_t>& next_ids = rows.next_ids;
  ASSERT_EQ(heads.size(), 2u);
  RecordingSuccessors successors;
  std::promise<void> release;
  auto blocked = BlockWriter(writer, release.get_future().share());
  const auto complete = [&](std::size_t i) { SubmitCompletion(writer, successors, heads[i]); };
  complete(0);
  writer.Submit({[](store::Store&) { throw std::runtime_error("bad"); }, {}});
  complete(1);
  release.set_value();
  blocked.get();
  writer.Run([](store::Store&) {});
  EXPECT_EQ(successors.asked,
            (std::vector<std::vector<std::string>>{{"a"}, {"a"}, {"b"}}));
  std::lock_guard lock(successors.mutex);
  std::vector<std::int64_t> ids;
  for (const auto& handed : successors.handed_over) {
    for (const auto& c : handed) ids.push_back(c.lease.id);
  }
  EXPECT_EQ(ids, next_ids);
}

TEST_F(WriterTest, AFailingChangeCostsOnlyItselfNotItsGroup) {
  Writer writer(options_, Logger());
  std::promise<void> release;
  auto blocked = BlockWriter(writer, release.get_future().share());
  std::atomic<int> committed{0};
  std::atomic<int> bad_committed{0};
  writer.Submit({[](store::Store&) {}, [&] { ++committed; }});
  writer.Submit({[](store::Store&) { throw std::runtime_error("bad"); }, [&] { ++bad_committed; }});
  writer.Submit({[](store::Store&) {}, [&] { ++committed; }});
  release.set_value();
  blocked.get();
  writer.Run([](store::Store&) {});
  EXPECT_EQ(committed.load(), 2);
  EXPECT_EQ(bad_committed.load(), 0);
}

TEST_F(WriterTest, RetriesWhileAnotherConnectionHoldsTheWriteLock) {
  options_.busy_timeout_ms = 5;
  Writer writer(options_, Logger());
  SQLite::Database other(options_.path, SQLite::OPEN_READWRITE);
  other.exec("BEGIN IMMEDIATE");
  std::atomic<bool> applied{false};
  auto run = std::async(std::launch::async, [&] {
    writer.Run([&](store::Store& s) {
      s.GetLimits();
      applied = true;
    });
  });
  // It cannot have committed while the lock is held.
  EXPECT_EQ(run.wait_for(50ms), std::future_status::timeout);
  other.exec("COMMIT");
  run.get();
  EXPECT_TRUE(applied.load());
}

TEST_F(WriterTest, RunAloneRunsOutsideATransaction) {
  Writer writer(options_, Logger());
  writer.RunAlone([](store::Store& s) {
    s.Checkpoint();
    s.ReclaimFreePages();
  });
}

}  // namespace
}  // namespace outbox::agent
