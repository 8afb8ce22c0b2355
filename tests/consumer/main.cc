// consumer: an application outside the edge-outbox tree, built against an
// installed edge-outbox (find_package(outbox) or pkg-config; see
// packaging/check-package.sh).
//
// Usage: consumer DB_FILE
// Creates DB_FILE with the outbox schema, commits one order row and its
// outbox message in ONE transaction on the application's own connection, and
// prints "pending=1". Exit status 0 on success, 1 on any error.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Transaction.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#include "outbox/store.h"
#ifdef CONSUMER_HAS_AGENT
#include "outbox/agent.h"  // the installed header must compile on its own
#endif

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer DB_FILE\n");
    return 1;
  }
  try {
    outbox::store::Options options;
    options.path = argv[1];
    options.create = true;
    outbox::store::Store store(options);

    // The application's own connection and its own table.
    SQLite::Database app(argv[1], SQLite::OPEN_READWRITE);
    app.exec("CREATE TABLE IF NOT EXISTS orders("
             "id INTEGER PRIMARY KEY, total_cents INTEGER NOT NULL)");
    outbox::store::Producer producer(app);

    SQLite::Transaction transaction(app, SQLite::TransactionBehavior::IMMEDIATE);
    app.exec("INSERT INTO orders(total_cents) VALUES (1999)");
    outbox::store::NewMessage message;
    message.topic = "order.created";
    message.key = "order-" + std::to_string(app.getLastInsertRowid());
    message.payload = R"({"total_cents":1999})";
    producer.Enqueue(message);
    transaction.commit();

    std::int64_t pending = 0;
    for (const auto& count : store.GetStats().counts) {
      if (count.status == outbox::store::Status::kPending) pending += count.count;
    }
    std::printf("pending=%lld\n", static_cast<long long>(pending));
    return pending == 1 ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "consumer: %s\n", error.what());
    return 1;
  }
}
