#include "orders.h"

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

namespace orders {

void CreateSchema(SQLite::Database& db) {
  db.exec(
      "CREATE TABLE IF NOT EXISTS orders(id INTEGER PRIMARY KEY, customer TEXT NOT NULL,"
      " item TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'placed');"
      "CREATE TABLE IF NOT EXISTS stock(item TEXT PRIMARY KEY,"
      " left INTEGER NOT NULL CHECK (left >= 0))");
}

outbox::agent::TopicOptions Route(const std::string& url) {
  outbox::agent::TopicOptions route;
  route.endpoint.url = url;
  route.ordering.by_key = true;
  route.retry.max_attempts = 5;
  route.hooks.on_dead_sql =
      "UPDATE orders SET state = 'unconfirmed' WHERE id = json_extract(:payload, '$.order')";
  return route;
}

std::int64_t Orders::Place(const std::string& customer, const std::string& item) {
  outbox::agent::Transaction txn(agent_, producer_);
  SQLite::Statement insert(db_, "INSERT INTO orders(customer, item) VALUES(?, ?)");
  insert.bind(1, customer);
  insert.bind(2, item);
  insert.exec();
  const std::int64_t id = db_.getLastInsertRowid();
  outbox::store::NewMessage message;
  message.topic = kTopic;
  message.key = "order-" + std::to_string(id);
  message.payload = R"({"order":)" + std::to_string(id) + R"(,"customer":")" + customer +
                    R"(","item":")" + item + R"("})";
  message.ordering_key = customer;
  txn.Enqueue(message);
  SQLite::Statement take(db_, "UPDATE stock SET left = left - 1 WHERE item = ?");
  take.bind(1, item);
  take.exec();  // out of stock: throws, and txn rolls everything back
  txn.Commit();
  return id;
}

}  // namespace orders
