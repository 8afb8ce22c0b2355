// What one application test costs with outbox::testing (issue #33): make a
// database, an agent on it and a TestReceiver, commit one message, RunDue,
// tear everything down. Against the same on a database file in a temporary
// directory (WAL, fsyncs), in the same run. Prints per-test ms and the ratio.
//   build/tests/bench/testkit_bench [tests=100]
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include <SQLiteCpp/Database.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>

#include "outbox/testing.h"

namespace {

namespace kit = outbox::testing;

void OneTest(const std::string& db_path, outbox::store::Producer& producer) {
  kit::TestReceiver receiver;
  outbox::agent::Options options;
  options.db_path = db_path;
  options.clock = std::make_shared<kit::TestClock>();
  options.logger = std::make_shared<spdlog::logger>("bench", std::make_shared<spdlog::sinks::null_sink_mt>());
  options.topics["order.created"].endpoint.url = receiver.Url();
  outbox::agent::Agent agent(options);
  agent.Start();
  static int key = 0;
  outbox::agent::Transaction txn(&agent, producer);
  txn.Enqueue({"order.created", "k" + std::to_string(++key), "{}", "", {}});
  txn.Commit();
  if (!agent.RunDue() || receiver.RequestCount() != 1) {
    std::fprintf(stderr, "testkit_bench: the message was not delivered\n");
    std::exit(1);
  }
}

double InMemoryMs(int tests) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < tests; ++i) {
    kit::InMemoryDatabase db;
    OneTest(db.path(), db.producer());
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

double FileMs(int tests) {
  char pattern[] = "/tmp/testkit-bench-XXXXXX";
  const std::filesystem::path dir = ::mkdtemp(pattern);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < tests; ++i) {
    const std::filesystem::path test_dir = dir / std::to_string(i);
    std::filesystem::create_directory(test_dir);
    const std::string path = (test_dir / "app.db").string();
    outbox::store::Options create;
    create.path = path;
    create.create = true;
    { outbox::store::Store schema(create); }
    SQLite::Database app(path, SQLite::OPEN_READWRITE, 5000);
    outbox::store::Producer producer(app);
    OneTest(path, producer);
    std::filesystem::remove_all(test_dir);
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::filesystem::remove_all(dir);
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  const int tests = argc > 1 ? std::atoi(argv[1]) : 100;
  if (tests < 1) {
    std::fprintf(stderr, "usage: testkit_bench [tests >= 1]\n");
    return 2;
  }
  InMemoryMs(5);  // warm up: first connections, thread start-up
  const double memory = InMemoryMs(tests);
  const double file = FileMs(tests);
  std::printf("tests=%d in-memory total_ms=%.0f per_test_ms=%.2f\n", tests, memory,
              memory / tests);
  std::printf("tests=%d file total_ms=%.0f per_test_ms=%.2f\n", tests, file, file / tests);
  std::printf("file/in-memory ratio=%.2f\n", file / memory);
  return 0;
}
