// The README's library example: an application commits an order and its
// message in one transaction; the agent sends it right after the commit.
// Built with the project so that the README cannot drift from the API.
//
//   library_example DB_FILE URL
#include <SQLiteCpp/Database.h>

#include <chrono>
#include <iostream>

#include "outbox/agent.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: library_example DB_FILE URL\n";
    return 2;
  }
  const std::string db_path = argv[1];

  // The agent: creates or migrates the outbox schema, then runs its threads.
  outbox::agent::Options options;
  options.db_path = db_path;
  options.topics["order.created"].endpoint.url = argv[2];
  options.topics["order.created"].retry.max_attempts = 10;
  outbox::agent::Agent agent(options);
  agent.Start();

  // The application's own connection, one Producer per connection.
  SQLite::Database db(db_path, SQLite::OPEN_READWRITE, /*busy_timeout_ms=*/5000);
  db.exec("CREATE TABLE IF NOT EXISTS orders(id INTEGER PRIMARY KEY, total_cents INTEGER)");
  outbox::store::Producer producer(db);

  {
    outbox::agent::Transaction txn(&agent, producer);  // BEGIN IMMEDIATE
    db.exec("INSERT INTO orders(total_cents) VALUES (1999)");
    outbox::store::NewMessage message;
    message.topic = "order.created";
    message.key = "order-" + std::to_string(db.getLastInsertRowid());  // unique per topic
    message.payload = R"({"total_cents":1999})";
    txn.Enqueue(message);
    txn.Commit();  // the message exists only now, and is sent at once
  }

  agent.Stop(std::chrono::seconds(5));  // in-flight sends finish or go back to pending
  const outbox::agent::MetricsSnapshot snapshot = agent.Snapshot();
  std::cout << "delivered: " << snapshot.topics.at("order.created").delivered << '\n';
  return 0;
}
