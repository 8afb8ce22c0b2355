// Shared set-up for agent tests: a database file in a temp dir, a real HTTP
// receiver on 127.0.0.1, a clock the test can move, and waiting helpers that
// poll with a deadline instead of sleeping a fixed time.
#pragma once

#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "../common/temp_dir.h"
#include "../common/wait_for.h"
#include "../transport/test_server.h"
#include "outbox/agent.h"

namespace outbox::agent::testing {

// Real wall, boot and monotonic time plus an offset the test advances; the
// wall clock alone can also jump (as when NTP or a person sets it).
class FakeClock final : public Clock {
 public:
  std::int64_t WallMs() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
               .count() +
           offset_ms_.load() + wall_jump_ms_.load();
  }
  std::chrono::steady_clock::time_point Monotonic() override {
    return std::chrono::steady_clock::now() + std::chrono::milliseconds(offset_ms_.load());
  }
  store::BootTime Boot() override {
    store::BootTime boot = store::SystemBootTime();
    boot.ms += offset_ms_.load();
    return boot;
  }
  // Time passes: every clock moves.
  void Advance(std::chrono::milliseconds by) { offset_ms_ += by.count(); }
  // Only the wall clock is set; boot and monotonic time go on unchanged.
  void JumpWall(std::chrono::milliseconds by) { wall_jump_ms_ += by.count(); }

 private:
  std::atomic<std::int64_t> offset_ms_{0};
  std::atomic<std::int64_t> wall_jump_ms_{0};
};

using outbox::testing::WaitFor;

class AgentTest : public ::testing::Test {
 protected:
  AgentTest() : db_path_(dir_.File("app.db")) {
    store::Options init;
    init.path = db_path_;
    init.create = true;
    store::Store create(init);
    app_ = std::make_unique<SQLite::Database>(db_path_, SQLite::OPEN_READWRITE, 5000);
    app_->exec("CREATE TABLE orders(id INTEGER PRIMARY KEY, note TEXT)");
    producer_ = std::make_unique<store::Producer>(*app_);
    observer_ = std::make_unique<SQLite::Database>(db_path_, SQLite::OPEN_READONLY, 5000);
  }

  // Options with one HTTP topic pointing at the test server.
  Options BaseOptions() {
    Options options;
    options.db_path = db_path_;
    options.sweep_interval_ms = 3'600'000;  // eager path only, unless a test says otherwise
    options.clock = clock_;
    return options;
  }

  TopicOptions HttpTopic(const std::string& path = "/events") {
    TopicOptions topic;
    topic.endpoint.url = server_.Url(path);
    topic.endpoint.timeout_ms = 2000;
    topic.retry.jitter = 0;
    return topic;
  }

  // Commits an order row and its message in one application transaction.
  std::int64_t Commit(Agent* agent, const std::string& topic, const std::string& key,
                      const std::string& payload = R"({"order":1})") {
    Transaction txn(agent, *producer_);
    app_->exec("INSERT INTO orders(note) VALUES('x')");
    const auto id = txn.Enqueue({topic, key, payload, "", {}}).id;
    txn.Commit();
    return id;
  }

  // Inserts with plain SQL, as another application would.
  void InsertPlain(const std::string& topic, const std::string& key) {
    SQLite::Statement q(*app_, "INSERT INTO outbox(topic, msg_key, payload) VALUES(?, ?, '{}')");
    q.bind(1, topic);
    q.bind(2, key);
    q.exec();
  }

  std::int64_t CountStatus(store::Status status) {
    SQLite::Statement q(*observer_, "SELECT count(*) FROM outbox WHERE status = ?");
    q.bind(1, static_cast<int>(status));
    q.executeStep();
    return q.getColumn(0).getInt64();
  }

  store::Row Row(std::int64_t id) {
    store::Options read;
    read.path = db_path_;
    store::Store s(read);
    return *s.Get(id);
  }

  outbox::testing::TempDir dir_;
  std::string db_path_;
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
  transport::testing::TestServer server_;
  std::unique_ptr<SQLite::Database> app_;
  std::unique_ptr<store::Producer> producer_;
  std::unique_ptr<SQLite::Database> observer_;
};

// A handler the test scripts: by key, what to answer; counts every call.
class ScriptedHandler final : public Handler {
 public:
  using Script = std::function<HandlerResult(const Delivery&)>;
  explicit ScriptedHandler(Script script) : script_(std::move(script)) {}
  HandlerResult Handle(const Delivery& delivery) override {
    {
      std::lock_guard lock(mutex_);
      ++calls_[std::string(delivery.key)];
    }
    return script_(delivery);
  }
  int Calls(const std::string& key) {
    std::lock_guard lock(mutex_);
    return calls_[key];
  }

 private:
  Script script_;
  std::mutex mutex_;
  std::map<std::string, int> calls_;  // guarded by mutex_
};

inline HandlerResult Delivered() { return {}; }
inline HandlerResult Failure(int status) {
  return {Outcome::kEndpointFailure, status, false, std::nullopt, "HTTP " + std::to_string(status)};
}
inline HandlerResult Refused(int status) {
  return {Outcome::kMessageFailure, status, false, std::nullopt, "HTTP " + std::to_string(status)};
}

}  // namespace outbox::agent::testing
