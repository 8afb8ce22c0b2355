// The console's message list (store::Operator::ListMessages, what GET
// /admin/api/messages runs) at 1 000 and 1 000 000 rows: p50 and p99 of a
// page of 50 per filter, over pages walked with the cursor from the start.
//
//   console_bench DIR [rows...]     (default: 1000 1000000)
//
// Rows: 20 topics, keys "eu-N"/"us-N", 1 % dead with dead_reason attempts
// and "HTTP 503" in last_error, 10 % delivered, the rest pending; written
// with plain SQL in one transaction (the schema's triggers apply).
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "outbox/store.h"

namespace {

using outbox::store::MessageQuery;
using outbox::store::Status;

void Fill(const std::string& path, long rows) {
  outbox::store::Options options;
  options.path = path;
  options.create = true;
  outbox::store::Store store(options);
  SQLite::Database db(path, SQLite::OPEN_READWRITE);
  db.exec("UPDATE outbox_limits SET max_pending = 0");
  SQLite::Transaction txn(db);
  SQLite::Statement insert(db,
                           "INSERT INTO outbox(topic, msg_key, payload, status, dead_reason,"
                           " last_error) VALUES(?, ?, x'7b7d', ?, ?, ?)");
  for (long i = 0; i < rows; ++i) {
    const int status = i % 100 == 7 ? 2 : (i % 10 == 3 ? 1 : 0);
    insert.bind(1, "topic-" + std::to_string(i % 20));
    insert.bind(2, std::string(i % 2 ? "eu-" : "us-") + std::to_string(i));
    insert.bind(3, status);
    if (status == 2) {
      insert.bind(4, "attempts");
      insert.bind(5, "HTTP 503 from receiver");
    } else {
      insert.bind(4);
      insert.bind(5);
    }
    insert.exec();
    insert.reset();
  }
  txn.commit();
}

void Measure(outbox::store::Operator& op, const char* name, const MessageQuery& query) {
  std::vector<double> ms;
  outbox::store::PageRequest page;
  page.limit = 50;
  for (int i = 0; i < 200; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const outbox::store::MessagePage result = op.ListMessages(query, page);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                           start).count());
    page.cursor = result.next_cursor;
    if (page.cursor.empty()) page.cursor.clear();
  }
  std::sort(ms.begin(), ms.end());
  std::printf("  %-34s p50 %8.3f ms  p99 %8.3f ms\n", name, ms[ms.size() / 2],
              ms[ms.size() * 99 / 100]);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: console_bench DIR [rows...]\n");
    return 2;
  }
  std::vector<long> sizes;
  for (int i = 2; i < argc; ++i) sizes.push_back(std::stol(argv[i]));
  if (sizes.empty()) sizes = {1000, 1000000};
  for (long rows : sizes) {
    const std::string path = std::string(argv[1]) + "/console-" + std::to_string(rows) + ".db";
    std::remove(path.c_str());
    Fill(path, rows);
    outbox::store::Options options;
    options.path = path;
    outbox::store::Store store(options);
    outbox::store::Operator op(store);
    std::printf("%ld rows, pages of 50 (200 pages each):\n", rows);
    MessageQuery q;
    q.status = Status::kDead;
    Measure(op, "status=dead", q);
    q = {};
    q.status = Status::kPending;
    Measure(op, "status=pending", q);
    q = {};
    q.topic = "topic-3";
    Measure(op, "topic", q);
    q.key_prefix = "eu-1";
    Measure(op, "topic + key_prefix", q);
    q = {};
    q.status = Status::kDead;
    q.topic = "topic-7";
    Measure(op, "status=dead + topic", q);
    q = {};
    q.error_text = "http 503";
    Measure(op, "error (bounded scan)", q);
    q = {};
    q.dead_reason = "attempts";
    Measure(op, "dead_reason", q);
    q = {};
    q.created_from = 0;
    Measure(op, "created range (bounded scan)", q);
    q = {};
    Measure(op, "no filter", q);
  }
  return 0;
}
