// InMemoryDatabase and TestClock (outbox/testing.h).
#include <SQLiteCpp/Database.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "outbox/testing.h"

namespace outbox::testing {
namespace {

constexpr int kBusyTimeoutMs = 5000;

std::string UniqueName() {
  static std::atomic<std::int64_t> counter{0};
  return "outbox-test-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
}

std::unique_ptr<SQLite::Database> Open(const std::string& path) {
  return std::make_unique<SQLite::Database>(
      path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE | SQLITE_OPEN_URI, kBusyTimeoutMs);
}

}  // namespace

struct InMemoryDatabase::Impl {
  std::string path;
  std::unique_ptr<SQLite::Database> connection;
  std::unique_ptr<store::Producer> producer;
};

InMemoryDatabase::InMemoryDatabase(std::string_view name) : impl_(std::make_unique<Impl>()) {
  impl_->path = store::SharedMemoryPath(name.empty() ? UniqueName() : name);
  // First the connection that keeps the database alive, then the schema
  // through a Store of its own (the Store goes; the database stays).
  impl_->connection = Open(impl_->path);
  store::Options create;
  create.path = impl_->path;
  create.create = true;
  store::Store schema(create);
  impl_->producer = std::make_unique<store::Producer>(*impl_->connection);
}

InMemoryDatabase::~InMemoryDatabase() = default;

const std::string& InMemoryDatabase::path() const { return impl_->path; }
SQLite::Database& InMemoryDatabase::connection() { return *impl_->connection; }
store::Producer& InMemoryDatabase::producer() { return *impl_->producer; }
std::unique_ptr<SQLite::Database> InMemoryDatabase::Connect() const { return Open(impl_->path); }

std::int64_t TestClock::WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
             .count() +
         offset_ms_.load() + wall_jump_ms_.load();
}

std::chrono::steady_clock::time_point TestClock::Monotonic() {
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(offset_ms_.load());
}

store::BootTime TestClock::Boot() {
  store::BootTime boot = store::SystemBootTime();
  boot.ms += offset_ms_.load();
  return boot;
}

void TestClock::Advance(std::chrono::milliseconds by) { offset_ms_ += by.count(); }
void TestClock::JumpWall(std::chrono::milliseconds by) { wall_jump_ms_ += by.count(); }

}  // namespace outbox::testing
