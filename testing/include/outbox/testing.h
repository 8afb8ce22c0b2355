// outbox/testing.h: testing an application that uses the outbox, in memory
// and without sleeping (docs/testing.md). Links as outbox::testing; needs no
// test framework.
//
//  - InMemoryDatabase: one named in-memory database shared by the
//    application's connections and an Agent's (Options::db_path = path()).
//  - TestClock: the agent's clock (wall, monotonic and the boot clock of
//    leases); Advance() moves all three.
//  - Recorder and Expect: what the application enqueued, in commit order,
//    read without sending anything.
//  - TestReceiver: an HTTP receiver on 127.0.0.1 and a free port that
//    records every request and answers from a script.
//  - History: what one message went through (requests, answers, final row).
//
// With Agent::RunDue() a test commits, advances the clock and sees the
// retries happen, without sleeping.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "outbox/agent.h"
#include "outbox/store.h"
#include "outbox/transport.h"

namespace SQLite {
class Database;
}

namespace outbox::testing {

// ---------------------------------------------------------------------------
// The database.

// A fresh in-memory database with the outbox schema, shared by every
// connection of this process opened on path() (store::SharedMemoryPath). It
// lives as long as this object (which holds the application's connection)
// or any other connection to it. Not thread-safe: connection() and
// producer() belong to one thread; other threads open their own (Connect()).
class InMemoryDatabase {
 public:
  // `name` "" picks one unique in the process. Throws std::invalid_argument
  // for a name SharedMemoryPath refuses, store::StoreError if SQLite fails.
  explicit InMemoryDatabase(std::string_view name = "");
  ~InMemoryDatabase();
  InMemoryDatabase(const InMemoryDatabase&) = delete;
  InMemoryDatabase& operator=(const InMemoryDatabase&) = delete;

  // "file:/NAME?vfs=memdb": for agent::Options::db_path, Recorder, History.
  const std::string& path() const;
  // The application's connection (busy timeout 5 s), and a Producer on it.
  SQLite::Database& connection();
  store::Producer& producer();
  // Another connection to the same database, for another thread.
  std::unique_ptr<SQLite::Database> Connect() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------
// Time.

// The agent's clock for tests: real time plus an offset the test moves.
// Advance() moves wall, monotonic and boot time together (retries come due,
// leases and breakers run out); JumpWall() moves the wall clock alone, as
// when NTP sets it. Thread-safe.
class TestClock final : public agent::Clock {
 public:
  std::int64_t WallMs() override;
  std::chrono::steady_clock::time_point Monotonic() override;
  store::BootTime Boot() override;
  void Advance(std::chrono::milliseconds by);
  void JumpWall(std::chrono::milliseconds by);

 private:
  std::atomic<std::int64_t> offset_ms_{0};
  std::atomic<std::int64_t> wall_jump_ms_{0};
};

// ---------------------------------------------------------------------------
// What the application enqueued.

// One outbox row as a test reads it.
struct Message {
  std::int64_t id = 0;
  std::string topic = {};
  std::string key = {};
  std::string payload = {};
  std::map<std::string, std::string> headers = {};  // the row's own headers
  std::optional<std::string> schema_version = std::nullopt;
  std::optional<std::string> ordering_key = std::nullopt;
  std::optional<std::int64_t> deliver_at = std::nullopt;
  std::optional<std::int64_t> expires_at = std::nullopt;
  store::Status status = store::Status::kPending;
  int attempts = 0;
  std::optional<std::string> last_error = std::nullopt;
  std::optional<std::string> dead_reason = std::nullopt;
};

// Reads the outbox on a connection of its own; sends nothing and changes
// nothing. Not thread-safe. Throws store::StoreError if the database cannot
// be read.
class Recorder {
 public:
  explicit Recorder(const std::string& db_path);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Committed messages in commit order (ids grow with it); `topic` ""
  // means every topic. Rolled-back ones were never there.
  std::vector<Message> Enqueued(std::string_view topic = "");
  std::vector<Message> Enqueued(std::string_view topic, std::string_view key);
  std::optional<Message> Get(std::int64_t id);

 private:
  std::unique_ptr<store::Store> store_;
};

// What an expected message must have; unset fields match anything.
struct Match {
  std::string topic = {};
  std::optional<std::string> key = std::nullopt;
  std::optional<std::string> payload = std::nullopt;
  // Each of these headers, with this value (others may be there too).
  std::map<std::string, std::string> headers = {};
  std::optional<std::string> schema_version = std::nullopt;
  std::optional<std::string> ordering_key = std::nullopt;
  std::optional<store::Status> status = std::nullopt;
};

// Assertions that name what they found instead: each returns nullopt when
// it holds, else a text for the test's failure message, e.g.
//   EXPECT_EQ(expect.Enqueued({.topic = "order.created", .key = "42"}), std::nullopt);
class Expect {
 public:
  explicit Expect(const std::string& db_path);
  // Exactly `count` messages match (count < 0: at least one).
  std::optional<std::string> Enqueued(const Match& match, int count = -1);
  // No message of `topic` ("" = of any topic) was enqueued.
  std::optional<std::string> NothingEnqueued(std::string_view topic = "");

 private:
  Recorder recorder_;
};

// ---------------------------------------------------------------------------
// The receiver.

// How the receiver answers one request.
struct Reply {
  enum class Kind {
    kStatus,  // answer `status` (with Retry-After when retry_after is set)
    kHang,    // answer nothing until the receiver is destroyed or max_hang
    kLose,    // record the request as applied, then close the connection
              // after the status line: the sender never sees a whole answer
  };
  Kind kind = Kind::kStatus;
  int status = 200;
  std::optional<std::chrono::seconds> retry_after = std::nullopt;
  std::string body = {};
};

// One request the receiver got, and what it answered.
struct ReceivedRequest {
  std::string path = {};
  std::vector<std::pair<std::string, std::string>> headers = {};  // as received
  std::string body = {};  // decoded (a gzip body arrives unzipped)
  std::string idempotency_key = {};
  // With signing secrets: the check of the Standard Webhooks signature.
  std::optional<transport::SignatureCheck> signature = std::nullopt;
  Reply reply;
  // The header's value ("" if absent); names compare case-insensitively.
  std::string Header(std::string_view name) const;
};

struct TestReceiverOptions {
  // Verify each request's webhook-signature against these (none: don't).
  // The check's time is the system clock's, as the signer's is: a TestClock
  // moves neither.
  std::vector<std::string> signing_secrets = {};
  // The longest a kHang reply holds its request.
  std::chrono::milliseconds max_hang = std::chrono::seconds(30);
  // Concurrent requests it serves (more wait for a thread).
  int threads = 4;
};

// A real HTTP server on 127.0.0.1 and a port the kernel picks, serving on
// its own threads from construction to destruction (which releases hung
// requests and joins every thread). Every POST to any path is recorded and
// answered by the next scripted Reply, or by Otherwise() (200) once the
// script is used up. Thread-safe.
class TestReceiver {
 public:
  TestReceiver();
  explicit TestReceiver(TestReceiverOptions options);
  ~TestReceiver();
  TestReceiver(const TestReceiver&) = delete;
  TestReceiver& operator=(const TestReceiver&) = delete;

  int port() const;
  // "http://127.0.0.1:PORT" + path.
  std::string Url(std::string_view path = "/events") const;

  // The script: replies in order, one per request.
  TestReceiver& Then(int status);
  TestReceiver& Then(int status, std::chrono::seconds retry_after);
  TestReceiver& Then(Reply reply);
  TestReceiver& ThenHang();
  TestReceiver& ThenLoseAnswer();
  // The reply after the script (default 200).
  TestReceiver& Otherwise(Reply reply);
  // Requests that `which` picks always get `reply`, ahead of the script
  // (which they do not use up); the first rule that picks one wins. For a
  // receiver that refuses one message while it accepts the others.
  // `which` runs on a server thread and must not call back into this.
  TestReceiver& Always(std::function<bool(const ReceivedRequest&)> which, Reply reply);

  std::vector<ReceivedRequest> Requests() const;
  // The requests carrying this Idempotency-Key, in arrival order.
  std::vector<ReceivedRequest> RequestsFor(std::string_view idempotency_key) const;
  std::size_t RequestCount() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------
// What one message went through.

struct MessageHistory {
  std::optional<Message> message = std::nullopt;          // the row now; nullopt if gone
  std::string idempotency_key = {};             // what the agent sent it as
  std::vector<ReceivedRequest> requests = {};   // every request for it, in order
  // One line, e.g. `order.created/42 (id 7): 503, 429, 200 -> delivered
  // after 3 attempts`; hangs and lost answers read "hang" and "lost".
  std::string Describe() const;
};

// Reads the row at `db_path` and the receiver's requests for it (matched by
// Idempotency-Key; messages sent in batches are not matched). Throws
// store::StoreError if the database cannot be read.
MessageHistory History(const std::string& db_path, const TestReceiver& receiver, std::int64_t id);

}  // namespace outbox::testing
