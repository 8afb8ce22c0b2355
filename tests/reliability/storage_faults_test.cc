// Issue #10, storage faults: a database on a tiny filesystem that fills up,
// the max_db_bytes limit, another process holding the write lock for
// seconds, and truncated or corrupted database files.
#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "../agent/agent_fixture.h"
#include "capture_sink.h"
#include "writer.h"
#include "run_process.h"

namespace outbox::reliability::testing {
namespace {

using agent::Agent;
using agent::Options;
using agent::Transaction;
using agent::testing::ScriptedHandler;
using agent::testing::WaitFor;
using namespace std::chrono_literals;

constexpr int kSqliteFull = 13;
constexpr int kSqliteBusy = 5;

std::int64_t Count(SQLite::Database& db, const std::string& sql) {
  SQLite::Statement q(db, sql);
  q.executeStep();
  return q.getColumn(0).getInt64();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Mounts a tmpfs of `bytes` on `dir` inside a mount namespace of this test
// process alone (private, so nothing propagates to the host). Returns why not
// when the environment does not allow it (no CAP_SYS_ADMIN and no user
// namespaces, or a process that already runs threads).
std::string MountTinyFilesystem(const std::string& dir, std::size_t bytes) {
  if (::unshare(CLONE_NEWNS) != 0) {
    const uid_t uid = ::getuid();
    const gid_t gid = ::getgid();
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
      return std::string("unshare(CLONE_NEWNS) and a user namespace are not permitted: ") +
             std::strerror(errno);
    }
    WriteFile("/proc/self/setgroups", "deny");
    WriteFile("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1");
    WriteFile("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1");
  }
  if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return std::string("cannot make the mount namespace private: ") + std::strerror(errno);
  }
  const std::string options = "size=" + std::to_string(bytes);
  if (::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
    return std::string("mounting a tmpfs is not permitted: ") + std::strerror(errno);
  }
  return "";
}

class StorageFaultsTest : public ::testing::Test {
 protected:
  void CreateDatabase(const std::string& path) {
    db_path_ = path;
    store::Options init;
    init.path = path;
    init.create = true;
    store::Store create(init);
    app_ = std::make_unique<SQLite::Database>(path, SQLite::OPEN_READWRITE, 5000);
    app_->exec("CREATE TABLE IF NOT EXISTS orders(id INTEGER PRIMARY KEY, note TEXT)");
    producer_ = std::make_unique<store::Producer>(*app_);
  }

  Options AgentOptions() {
    Options options;
    options.db_path = db_path_;
    options.sweep_interval_ms = 20;
    options.retention.delivered_ms = 1;  // purge as soon as delivered
    options.retention.interval_ms = 20;
    return options;
  }

  std::shared_ptr<ScriptedHandler> Acknowledging() {
    return std::make_shared<ScriptedHandler>(
        [](const agent::Delivery&) { return agent::testing::Delivered(); });
  }

  // A fresh connection, so that counts come from the file, not a cache.
  std::int64_t CountFresh(const std::string& sql) {
    SQLite::Database db(db_path_, SQLite::OPEN_READONLY, 5000);
    return Count(db, sql);
  }

  outbox::testing::TempDir dir_;
  std::string db_path_;
  std::unique_ptr<SQLite::Database> app_;
  std::unique_ptr<store::Producer> producer_;
};

// ---------------------------------------------------------------------------
// A full disk.

// SQLite cannot write anything, not even a claim, on a disk that is 100%
// full (its WAL must grow, or a checkpoint must grow the file). So the test
// fills the disk, checks that the application is told clearly and loses
// nothing, lets the agent run into the full disk, then frees a ballast file
// (as an operator or a log rotation would): the agent resumes by itself,
// delivers everything, and retention gives the outbox's space back. To never
// reach a full disk, set limits.max_db_bytes (next test).
TEST_F(StorageFaultsTest, AFullDiskFailsEnqueueClearlyLosesNothingAndDeliveryResumes) {
  constexpr std::size_t kFilesystemBytes = 16 << 20;
  constexpr std::size_t kBallastBytes = 5 << 20;  // more than the largest WAL (4 MiB)
  const std::string mount_point = dir_.File("fs");
  std::filesystem::create_directory(mount_point);
  const std::string why = MountTinyFilesystem(mount_point, kFilesystemBytes);
  if (!why.empty()) GTEST_SKIP() << "needs a tiny tmpfs: " << why;
  struct Unmount {
    std::string dir;
    ~Unmount() { ::umount2(dir.c_str(), MNT_DETACH); }
  } unmount{mount_point};
  const std::string ballast = mount_point + "/ballast";
  WriteFile(ballast, std::string(kBallastBytes, 'b'));
  const auto free_bytes = [&] {
    struct statvfs fs {};
    ::statvfs(mount_point.c_str(), &fs);
    return static_cast<std::int64_t>(fs.f_bavail) * static_cast<std::int64_t>(fs.f_frsize);
  };

  CreateDatabase(mount_point + "/app.db");
  const std::string payload(16 * 1024, 'p');
  int committed = 0;
  std::optional<store::StoreError> failure;
  for (int i = 0; i < 10'000 && !failure; ++i) {
    try {
      Transaction txn(nullptr, *producer_);
      app_->exec("INSERT INTO orders(note) VALUES('order " + std::to_string(i) + "')");
      txn.Enqueue({"t", "k" + std::to_string(i), payload, "", {}});
      txn.Commit();
      ++committed;
    } catch (const store::StoreError& e) {
      failure = e;
    } catch (const SQLite::Exception& e) {
      // The application's own INSERT hit the full disk first.
      failure = store::StoreError(e.what(), e.getExtendedErrorCode());
    }
  }
  ASSERT_TRUE(failure) << "the filesystem never filled up";
  EXPECT_EQ(failure->sqlite_code() & 0xff, kSqliteFull) << failure->what();
  EXPECT_NE(std::string(failure->what()).find("full"), std::string::npos) << failure->what();
  EXPECT_GT(committed, 100);
  // The application's transaction rolled back as a whole: its order row is
  // gone with its message, and everything committed before is there.
  EXPECT_NE(sqlite3_get_autocommit(app_->getHandle()), 0) << "transaction left open";
  EXPECT_EQ(CountFresh("SELECT count(*) FROM orders"), committed);
  EXPECT_EQ(CountFresh("SELECT count(*) FROM outbox"), committed);
  const std::int64_t free_when_full = free_bytes();

  auto sink = std::make_shared<CaptureSink>();
  auto handler = Acknowledging();
  Options options = AgentOptions();
  options.logger = CaptureLogger(sink);
  Agent agent(options);
  agent.RegisterHandler("t", handler);
  agent.Start();
  // The agent runs into the full disk: it says so and keeps going.
  ASSERT_TRUE(WaitFor([&] { return sink->Count("disk is full") > 0; })) << sink->Text();
  std::filesystem::remove(ballast);

  ASSERT_TRUE(WaitFor([&] { return CountFresh("SELECT count(*) FROM outbox") == 0; }, 60s))
      << CountFresh("SELECT count(*) FROM outbox WHERE status = 1") << " delivered, "
      << CountFresh("SELECT count(*) FROM outbox") << " rows left\n" << sink->Text();
  for (int i = 0; i < committed; ++i) EXPECT_EQ(handler->Calls("k" + std::to_string(i)), 1) << i;
  // Retention gave the outbox's pages back to the filesystem (incremental
  // vacuum, WAL truncation): far more is free than the ballast alone.
  ASSERT_TRUE(WaitFor([&] {
    return free_bytes() > free_when_full + static_cast<std::int64_t>(kBallastBytes) + (4 << 20);
  }));
  // And the application can enqueue again.
  {
    Transaction txn(&agent, *producer_);
    app_->exec("INSERT INTO orders(note) VALUES('after')");
    txn.Enqueue({"t", "after", payload, "", {}});
    txn.Commit();
  }
  ASSERT_TRUE(WaitFor([&] { return handler->Calls("after") == 1; }));
  agent.Stop();
  std::printf("full disk: %d messages committed on a 16 MiB tmpfs before SQLITE_FULL (\"%s\"); "
              "after a ballast file was freed all were delivered once and %lld bytes are free "
              "again\n",
              committed, failure->what(), static_cast<long long>(free_bytes()));
}

TEST_F(StorageFaultsTest, MaxDbBytesRefusesEnqueueButLeavesTheTransactionUsable) {
  CreateDatabase(dir_.File("app.db"));
  store::Limits limits;
  limits.max_db_bytes = 512 * 1024;
  {
    store::Options open;
    open.path = db_path_;
    store::Store s(open);
    s.SetLimits(limits);
  }
  const std::string payload(8 * 1024, 'p');
  int committed = 0;
  bool refused = false;
  for (int i = 0; i < 1000 && !refused; ++i) {
    Transaction txn(nullptr, *producer_);
    app_->exec("INSERT INTO orders(note) VALUES('order')");
    try {
      txn.Enqueue({"t", "k" + std::to_string(i), payload, "", {}});
    } catch (const store::CapacityError& e) {
      refused = true;
      EXPECT_NE(std::string(e.what()).find("limits.max_db_bytes"), std::string::npos) << e.what();
      // The caller's transaction is still open and usable: its own row is
      // there until it decides.
      EXPECT_EQ(sqlite3_get_autocommit(app_->getHandle()), 0);
      EXPECT_EQ(Count(*app_, "SELECT count(*) FROM orders"), committed + 1);
      txn.Rollback();
      break;
    }
    txn.Commit();
    ++committed;
  }
  ASSERT_TRUE(refused);
  EXPECT_EQ(CountFresh("SELECT count(*) FROM orders"), committed);
  EXPECT_EQ(CountFresh("SELECT count(*) FROM outbox"), committed);

  auto handler = Acknowledging();
  Options options = AgentOptions();
  options.limits = limits;
  Agent agent(options);
  agent.RegisterHandler("t", handler);
  agent.Start();
  ASSERT_TRUE(WaitFor([&] { return CountFresh("SELECT count(*) FROM outbox") == 0; }, 60s));
  Transaction txn(&agent, *producer_);
  txn.Enqueue({"t", "after", payload, "", {}});
  txn.Commit();
  ASSERT_TRUE(WaitFor([&] { return handler->Calls("after") == 1; }));
  agent.Stop();
}

// A state change the writer cannot apply (the disk is full, the file broke)
// is logged, but not once per change: a full disk fails hundreds a second.
TEST_F(StorageFaultsTest, AWriterThatKeepsFailingLogsOncePerInterval) {
  CreateDatabase(dir_.File("app.db"));
  auto sink = std::make_shared<CaptureSink>();
  store::Options options;
  options.path = db_path_;
  {
    agent::Writer writer(options, CaptureLogger(sink));
    for (int i = 0; i < 200; ++i) {
      writer.Submit({[](store::Store&) {
                       throw store::StoreError("commit: database or disk is full", kSqliteFull);
                     },
                     {}});
    }
    writer.Run([](store::Store&) {});  // everything before it has been tried
  }
  EXPECT_EQ(sink->Count("giving up on a state change"), 1) << sink->Text();
  EXPECT_EQ(sink->Count("disk is full"), 1) << sink->Text();
}

// ---------------------------------------------------------------------------
// Another process holds the write lock.

// A child process, forked before any thread exists, that takes the write
// lock (BEGIN IMMEDIATE) when told to, holds it for the given time and
// commits. Its own connection; nothing shared with the parent.
class LockHolder {
 public:
  explicit LockHolder(const std::string& db_path) {
    if (::pipe(command_) != 0 || ::pipe(reply_) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork");
    if (pid_ == 0) ChildMain(db_path);
    ::close(command_[0]);
    ::close(reply_[1]);
  }
  ~LockHolder() {
    ::close(command_[1]);  // end of commands: the child exits
    ::close(reply_[0]);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  // Returns once the child holds the lock; it lets go after `hold`.
  void Hold(std::chrono::milliseconds hold) {
    const std::int32_t ms = static_cast<std::int32_t>(hold.count());
    if (::write(command_[1], &ms, sizeof ms) != sizeof ms) throw std::runtime_error("write");
    char locked = 0;
    if (::read(reply_[0], &locked, 1) != 1 || locked != 'L') {
      throw std::runtime_error("lock holder failed to take the lock");
    }
  }
  // Returns once the child has committed and let go.
  void WaitReleased() {
    char released = 0;
    if (::read(reply_[0], &released, 1) != 1 || released != 'R') {
      throw std::runtime_error("lock holder failed to release the lock");
    }
  }

 private:
  [[noreturn]] void ChildMain(const std::string& db_path) {
    ::close(command_[1]);
    ::close(reply_[0]);
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
      ::_exit(1);
    }
    sqlite3_busy_timeout(db, 30'000);
    std::int32_t ms = 0;
    while (::read(command_[0], &ms, sizeof ms) == sizeof ms) {
      if (sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) ::_exit(2);
      if (::write(reply_[1], "L", 1) != 1) ::_exit(3);
      // Holding the lock for this long is the fault under test.
      ::usleep(static_cast<useconds_t>(ms) * 1000);
      if (sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) ::_exit(4);
      if (::write(reply_[1], "R", 1) != 1) ::_exit(5);
    }
    sqlite3_close(db);
    ::_exit(0);
  }

  pid_t pid_ = -1;
  int command_[2] = {-1, -1};
  int reply_[2] = {-1, -1};
};

TEST_F(StorageFaultsTest, AWriteLockHeldForSecondsDelaysButLosesNothing) {
  CreateDatabase(dir_.File("app.db"));
  LockHolder holder(db_path_);  // forked before the agent starts any thread
  auto handler = Acknowledging();
  Agent agent(AgentOptions());
  agent.RegisterHandler("t", handler);
  agent.Start();
  const auto commit = [&](const std::string& key) {
    Transaction txn(&agent, *producer_);
    app_->exec("INSERT INTO orders(note) VALUES('x')");
    txn.Enqueue({"t", key, "{}", "", {}});
    txn.Commit();
  };
  for (int i = 0; i < 50; ++i) commit("before-" + std::to_string(i));

  // 2 s: within the application's 5 s busy timeout, the commit waits.
  holder.Hold(2000ms);
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) commit("during-" + std::to_string(i));
  const auto waited = std::chrono::steady_clock::now() - started;
  holder.WaitReleased();
  EXPECT_GE(waited, 1500ms) << "the commits did not wait for the lock";

  // 3 s against a connection that waits only 300 ms: a clear SQLITE_BUSY
  // error, nothing half-written, and the application can simply try again.
  SQLite::Database impatient(db_path_, SQLite::OPEN_READWRITE, 300);
  store::Producer impatient_producer(impatient);
  holder.Hold(3000ms);
  try {
    Transaction txn(&agent, impatient_producer);
    txn.Enqueue({"t", "impatient", "{}", "", {}});
    txn.Commit();
    ADD_FAILURE() << "enqueue succeeded while another process held the write lock";
  } catch (const store::StoreError& e) {
    EXPECT_EQ(e.sqlite_code() & 0xff, kSqliteBusy) << e.what();
    EXPECT_NE(std::string(e.what()).find("locked"), std::string::npos) << e.what();
  }
  holder.WaitReleased();
  {
    Transaction txn(&agent, impatient_producer);
    txn.Enqueue({"t", "impatient", "{}", "", {}});
    txn.Commit();
  }

  ASSERT_TRUE(WaitFor([&] { return CountFresh("SELECT count(*) FROM outbox") == 0; }, 30s));
  agent.Stop();
  for (int i = 0; i < 50; ++i) EXPECT_EQ(handler->Calls("before-" + std::to_string(i)), 1);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(handler->Calls("during-" + std::to_string(i)), 1);
  EXPECT_EQ(handler->Calls("impatient"), 1);
  EXPECT_EQ(CountFresh("SELECT count(*) FROM orders"), 70);
}

// ---------------------------------------------------------------------------
// Truncated and corrupted files.

class CorruptFileTest : public StorageFaultsTest {
 protected:
  // A good outbox database with some rows, checkpointed so that everything
  // lives in the main file; returns its bytes.
  std::string GoodDatabase() {
    CreateDatabase(dir_.File("good.db"));
    for (int i = 0; i < 200; ++i) {
      store::NewMessage message{"t", "k" + std::to_string(i), std::string(300, 'x'), "", {}};
      store::EnqueueOptions options;
      options.standalone = true;
      producer_->Enqueue(message, options);
    }
    producer_.reset();
    app_->exec("PRAGMA wal_checkpoint(TRUNCATE)");
    app_.reset();
    return ReadFile(db_path_);
  }

  // Opens `path` with Store and reads it every way outboxctl does. Returns
  // the error text, or "" if everything worked. Anything but a StoreError is
  // a test failure (gtest reports an escaping exception).
  std::string OpenAndRead(const std::string& path) {
    try {
      store::Options open;
      open.path = path;
      store::Store s(open);
      s.GetStats();
      s.List({});
      s.Get(1);
      return "";
    } catch (const store::StoreError& e) {
      return e.what();
    }
  }
};

TEST_F(CorruptFileTest, DamagedFilesGiveAClearErrorAndAreNeverRewritten) {
  const std::string good = GoodDatabase();
  ASSERT_GT(good.size(), 16u * 4096);
  struct Damage {
    const char* name;
    std::string bytes;
  };
  std::string bad_header = good;
  std::memset(bad_header.data(), 'X', 16);
  std::string bad_pages = good;
  // Every page after the first few: the outbox table's b-tree and indexes.
  for (std::size_t at = 4 * 4096; at < bad_pages.size(); at += 4096) {
    std::memset(bad_pages.data() + at, 0xA5, 64);
  }
  std::string text;
  for (int i = 0; i < 200; ++i) text += "this is a log file, not a database\n";
  const std::vector<Damage> damages = {
      {"truncated to half", good.substr(0, good.size() / 2)},
      {"truncated inside the header", good.substr(0, 60)},
      {"header overwritten", bad_header},
      {"b-tree pages overwritten", bad_pages},
      {"a text file", text},
  };
  const std::string path = dir_.File("damaged.db");
  for (const Damage& damage : damages) {
    SCOPED_TRACE(damage.name);
    WriteFile(path, damage.bytes);
    std::filesystem::remove(path + "-wal");
    std::filesystem::remove(path + "-shm");
    const std::string error = OpenAndRead(path);
    EXPECT_FALSE(error.empty()) << "read a damaged file without complaint";
    EXPECT_NE(error.find(path), std::string::npos) << "the error does not name the file: " << error;
    EXPECT_EQ(ReadFile(path), damage.bytes) << "Store rewrote the damaged file";

    for (const std::vector<std::string>& command :
         std::vector<std::vector<std::string>>{{"stats"}, {"list"}, {"show", "1"}, {"init"},
                                               {"retry", "--all-dead"}, {"purge"}}) {
      std::vector<std::string> argv = {OUTBOX_OUTBOXCTL, "--db", path};
      argv.insert(argv.end(), command.begin(), command.end());
      const ProcessResult result = RunProcess(argv);
      SCOPED_TRACE("outboxctl " + command.front());
      EXPECT_EQ(result.Signal(), 0) << "outboxctl crashed";
      EXPECT_EQ(result.ExitCode(), 1) << result.out << result.err;
      EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
      EXPECT_EQ(result.err.rfind("outboxctl: ", 0), 0u) << result.err;
      EXPECT_NE(result.err.find(path), std::string::npos) << result.err;
      EXPECT_EQ(ReadFile(path), damage.bytes) << "outboxctl rewrote the damaged file";
    }
    // The agent refuses to start on it, with an error, not a crash.
    Options options;
    options.db_path = path;
    EXPECT_THROW(Agent agent(options), store::StoreError);
    EXPECT_EQ(ReadFile(path), damage.bytes) << "the agent rewrote the damaged file";
  }
}

}  // namespace
}  // namespace outbox::reliability::testing
