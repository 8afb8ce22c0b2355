// A separate process running an Agent with a scripted handler, for tests
// that need an agent to crash or be killed:
//   agent_child DB poison   abort() when sending the payload "poison"; exit 0
//                           once no row is pending or in flight
//   agent_child DB hold     never answer (holds its leases until killed)
//   agent_child DB hook URL deliver topic "t" over HTTP to URL, confirming
//                           each order in table shop through on_delivered;
//                           exit 0 once no row is pending or in flight
#include <SQLiteCpp/Database.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>

#include "outbox/agent.h"

namespace {

class ChildHandler final : public outbox::agent::Handler {
 public:
  explicit ChildHandler(bool hold) : hold_(hold) {}
  outbox::agent::HandlerResult Handle(const outbox::agent::Delivery& delivery) override {
    if (hold_) {
      std::printf("holding\n");
      std::fflush(stdout);
      never_.wait();  // until the test kills us
    }
    if (delivery.payload == "poison") std::abort();
    return {};
  }

 private:
  bool hold_;
  std::promise<void> promise_;  // never set
  std::shared_future<void> never_ = promise_.get_future().share();
};

}  // namespace

int main(int argc, char** argv) {
  const bool hook = argc == 4 && std::string(argv[2]) == "hook";
  if (argc != 3 && !hook) {
    std::fprintf(stderr, "usage: agent_child DB poison|hold|hook URL\n");
    return 2;
  }
  const std::string db = argv[1];
  const bool hold = std::string(argv[2]) == "hold";
  outbox::agent::Options options;
  options.db_path = db;
  options.sweep_interval_ms = 20;
  options.crash_budget = 3;
  if (hook) {
    outbox::agent::TopicOptions& topic = options.topics["t"];
    topic.endpoint.url = argv[3];
    topic.workers = 4;
    topic.hooks.on_delivered_sql = "UPDATE shop SET confirmed_at = :now WHERE order_key = :key";
  }
  outbox::agent::Agent agent(options);
  if (!hook) agent.RegisterHandler("t", std::make_shared<ChildHandler>(hold));
  agent.Start();
  SQLite::Database observer(db, SQLite::OPEN_READONLY, 5000);
  for (;;) {
    SQLite::Statement left(observer, "SELECT count(*) FROM outbox WHERE status IN (0, 3)");
    left.executeStep();
    if (left.getColumn(0).getInt64() == 0) break;
    // A test helper process: polling its own progress is all it does.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  agent.Stop();
  return 0;
}
