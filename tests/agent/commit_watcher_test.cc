#include "commit_watcher.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>

#include "common/temp_dir.h"
#include "outbox/store.h"

namespace outbox::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Far above the milliseconds it takes; only a broken watcher waits this long.
constexpr milliseconds kDeadline{5000};

// Counts callbacks; tests wait for a count with a deadline.
class CallCounter {
 public:
  void operator()() {
    std::lock_guard lock(mutex_);
    ++calls_;
    changed_.notify_all();
  }
  bool WaitFor(int calls, milliseconds deadline = kDeadline) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, deadline, [&] { return calls_ >= calls; });
  }
  int calls() {
    std::lock_guard lock(mutex_);
    return calls_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int calls_ = 0;  // guarded by mutex_
};

// Another process's view: a plain sqlite3 connection that inserts with SQL.
class ForeignWriter {
 public:
  explicit ForeignWriter(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
      throw std::runtime_error("open failed");
    }
    sqlite3_busy_timeout(db_, 5000);
  }
  ~ForeignWriter() { sqlite3_close(db_); }
  ForeignWriter(const ForeignWriter&) = delete;
  ForeignWriter& operator=(const ForeignWriter&) = delete;

  void Insert(const std::string& key) {
    Exec("INSERT INTO outbox(topic, msg_key, payload) VALUES ('t', '" + key + "', 'x')");
  }

  void Exec(const std::string& sql) {
    char* error = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
      const std::string what = error != nullptr ? error : "insert failed";
      sqlite3_free(error);
      throw std::runtime_error(what);
    }
  }

 private:
  sqlite3* db_ = nullptr;
};

class CommitWatcherTest : public ::testing::TestWithParam<bool> {
 protected:
  CommitWatcherTest() {
    store::Options options;
    options.path = db_path_;
    options.create = true;
    store::Store init(options);  // schema and WAL mode, then closed
  }

  CommitWatcher::Options WatcherOptions() const {
    CommitWatcher::Options options;
    options.db_path = db_path_;
    options.poll_ms = 5;
    options.force_polling = GetParam();
    return options;
  }

  testing::TempDir dir_;
  const std::string db_path_ = dir_.File("app.db");
};

TEST_P(CommitWatcherTest, RunsInTheRequestedMode) {
  CallCounter counter;
  CommitWatcher watcher(WatcherOptions(), std::ref(counter));
  // inotify exists on every Linux this targets; forcing selects polling.
  EXPECT_EQ(watcher.mode(),
            GetParam() ? CommitWatcher::Mode::kPolling : CommitWatcher::Mode::kInotify);
}

TEST_P(CommitWatcherTest, CommitOfAnotherConnectionCallsBack) {
  CallCounter counter;
  CommitWatcher watcher(WatcherOptions(), std::ref(counter));
  ForeignWriter writer(db_path_);
  const auto start = steady_clock::now();
  writer.Insert("k1");
  ASSERT_TRUE(counter.WaitFor(1));
  // Milliseconds, not a sweep interval; generous for a loaded CI machine.
  EXPECT_LT(steady_clock::now() - start, milliseconds(1000));

  writer.Insert("k2");
  EXPECT_TRUE(counter.WaitFor(2));
}

TEST_P(CommitWatcherTest, EachOfManyCommitsIsNoticed) {
  CallCounter counter;
  CommitWatcher watcher(WatcherOptions(), std::ref(counter));
  ForeignWriter writer(db_path_);
  // One at a time: a burst may be coalesced into one call, which is allowed.
  for (int i = 1; i <= 20; ++i) {
    writer.Insert("k" + std::to_string(i));
    ASSERT_TRUE(counter.WaitFor(i)) << "commit " << i;
  }
}

TEST_P(CommitWatcherTest, NoticesCommitsOnANewWalFile) {
  CallCounter counter;
  CommitWatcher watcher(WatcherOptions(), std::ref(counter));
  {
    ForeignWriter writer(db_path_);
    writer.Insert("k1");
    ASSERT_TRUE(counter.WaitFor(1));
  }
  // A checkpoint resets the -wal file; the next commit starts it over.
  ForeignWriter(db_path_).Exec("PRAGMA wal_checkpoint(TRUNCATE)");
  const int before = counter.calls();
  ForeignWriter writer(db_path_);
  writer.Insert("k2");
  EXPECT_TRUE(counter.WaitFor(before + 1));
}

TEST_P(CommitWatcherTest, ACallbackThatThrowsDoesNotStopTheWatching) {
  CallCounter counter;
  bool thrown = false;
  CommitWatcher watcher(WatcherOptions(), [&] {
    counter();
    if (!thrown) {
      thrown = true;  // only the watcher thread touches it
      throw std::runtime_error("callback failure");
    }
  });
  ForeignWriter writer(db_path_);
  writer.Insert("k1");
  ASSERT_TRUE(counter.WaitFor(1));
  writer.Insert("k2");
  EXPECT_TRUE(counter.WaitFor(2));
}

TEST_P(CommitWatcherTest, DestructionIsPrompt) {
  CallCounter counter;
  // The longest poll interval: a watcher that waited it out instead of being
  // woken by its eventfd would take the whole second (inotify mode sleeps in
  // poll() with no timeout at all and would never return). The bound is the
  // interval itself, not a guess at the machine's speed: a loaded CI machine
  // once took 270 ms to join the thread.
  auto options = WatcherOptions();
  options.poll_ms = 1000;
  auto watcher = std::make_unique<CommitWatcher>(options, std::ref(counter));
  const auto start = steady_clock::now();
  watcher.reset();
  EXPECT_LT(steady_clock::now() - start, milliseconds(options.poll_ms));
}

INSTANTIATE_TEST_SUITE_P(Modes, CommitWatcherTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& mode) {
                           return mode.param ? "Polling" : "Inotify";
                         });

TEST(CommitWatcher, RefusesAFileWithoutTheSchema) {
  testing::TempDir dir;
  CommitWatcher::Options options;
  options.db_path = dir.File("missing.db");
  EXPECT_THROW(CommitWatcher(options, [] {}), store::NotAnOutboxError);
}

TEST(CommitWatcher, RefusesAPollIntervalOutOfRange) {
  CommitWatcher::Options options;
  options.db_path = "unused.db";
  options.poll_ms = 0;
  EXPECT_THROW(CommitWatcher(options, [] {}), std::invalid_argument);
}

}  // namespace
}  // namespace outbox::agent
