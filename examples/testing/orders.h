// A small application that uses the outbox: placing an order writes the
// order row and its `order.created` message in one transaction. Its tests
// (orders_test.cc) are the examples of docs/testing.md.
#pragma once

#include <cstdint>
#include <string>

#include "outbox/agent.h"

namespace SQLite {
class Database;
}

namespace orders {

inline constexpr char kTopic[] = "order.created";

// The application's own tables: orders, whose `state` becomes 'unconfirmed'
// when the order's message is dead (the route's on_dead hook), and stock.
void CreateSchema(SQLite::Database& db);

// The route of order.created to the receiver at `url`: orders of one
// customer in order, five attempts, and on_dead marking the order.
outbox::agent::TopicOptions Route(const std::string& url);

// Not thread-safe: one per application connection.
class Orders {
 public:
  // `agent` may be null (the message then waits for a sweeper).
  Orders(SQLite::Database& db, outbox::store::Producer& producer, outbox::agent::Agent* agent)
      : db_(db), producer_(producer), agent_(agent) {}

  // Writes the order, enqueues {"order":ID,"customer":...,"item":...} with
  // key "order-ID" and the customer as ordering key, then takes the item
  // from stock; returns the order's id. An item out of stock fails the
  // stock table's CHECK (SQLite::Exception) and the whole transaction,
  // message included, is rolled back.
  std::int64_t Place(const std::string& customer, const std::string& item);

 private:
  SQLite::Database& db_;
  outbox::store::Producer& producer_;
  outbox::agent::Agent* agent_;
};

}  // namespace orders
