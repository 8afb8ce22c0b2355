// Fuzz target: the enqueue path an application (or `outboxctl enqueue`)
// takes, store::Producer on an in-memory database, with every field from
// the input. Each enqueue runs inside a transaction that is rolled back, so
// the database stays empty between inputs.
//
// Invariants: bad input is refused with std::invalid_argument (nothing
// else; the caller's transaction stays open); an accepted row reads back
// byte for byte; headers the trigger accepted parse for the agent (else it
// would dead-letter a row the application was allowed to write); an
// idempotent second enqueue returns the same id, a plain one DuplicateError.
#include <SQLiteCpp/Database.h>
#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "fuzz_input.h"
#include "outbox/store.h"
#include "outbox/transport.h"

namespace {

struct Database {
  Database() {
    outbox::store::Options options;
    options.path = ":memory:";
    options.create = true;
    store = std::make_unique<outbox::store::Store>(options);
    outbox::store::Limits limits;
    limits.max_payload_bytes = 4096;
    store->SetLimits(limits);
    producer = std::make_unique<outbox::store::Producer>(store->connection());
  }
  std::unique_ptr<outbox::store::Store> store;
  std::unique_ptr<outbox::store::Producer> producer;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace outbox;
  static Database db;
  fuzz::FuzzInput input(data, size);
  store::NewMessage message;
  message.topic = input.Field();
  message.key = input.Field();
  message.payload = input.Field();
  message.headers_json = input.Field();
  const std::uint8_t flags = input.Byte();
  if (flags & 1) message.retry.max_attempts = static_cast<int>(input.Integer() % 100000) - 10;
  if (flags & 2) message.retry.first_interval_ms = input.Integer();
  if (flags & 4) message.retry.backoff = (flags & 8) ? store::Backoff::kFixed
                                                     : store::Backoff::kExponential;

  sqlite3* connection = db.store->connection().getHandle();
  FUZZ_CHECK(sqlite3_exec(connection, "BEGIN", nullptr, nullptr, nullptr) == SQLITE_OK);
  try {
    const store::EnqueueResult result = db.producer->Enqueue(message);
    FUZZ_CHECK(result.inserted);
    const std::optional<store::Row> row = db.store->Get(result.id);
    FUZZ_CHECK(row.has_value());
    FUZZ_CHECK(row->topic == message.topic);
    FUZZ_CHECK(row->key == message.key);
    FUZZ_CHECK(row->payload == message.payload);
    FUZZ_CHECK(row->status == store::Status::kPending);
    FUZZ_CHECK(row->headers_json.value_or("") == message.headers_json);
    FUZZ_CHECK(message.payload.size() <= 4096);
    // What the trigger let in, the agent can send.
    try {
      transport::ParseRowHeaders(message.headers_json);
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "accepted by the trigger, refused by the agent: %s\n", e.what());
      fuzz::Violated("headers accepted by enqueue must parse for the agent", __FILE__, __LINE__);
    }
    store::EnqueueOptions idempotent;
    idempotent.idempotent = true;
    FUZZ_CHECK(db.producer->Enqueue(message, idempotent).id == result.id);
    try {
      db.producer->Enqueue(message);
      fuzz::Violated("a duplicate key was accepted", __FILE__, __LINE__);
    } catch (const store::DuplicateError&) {
    }
  } catch (const std::invalid_argument& e) {
    FUZZ_CHECK(e.what()[0] != '\0');
    // Refused before or by the INSERT: the caller's transaction is intact.
    FUZZ_CHECK(sqlite3_get_autocommit(connection) == 0);
  }
  FUZZ_CHECK(sqlite3_exec(connection, "ROLLBACK", nullptr, nullptr, nullptr) == SQLITE_OK);
  return 0;
}
