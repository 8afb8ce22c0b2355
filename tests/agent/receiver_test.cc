// outbox-receiver, the example receiver built on store::Inbox, run as a real
// process: exactly-once application, signatures, the simulated outage, a
// clean stop on SIGTERM, and an in-process Agent delivering to it through
// lost acknowledgements (the demo's flow without outboxd).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <regex>

#include "agent_fixture.h"

extern char** environ;

namespace outbox::agent::testing {
namespace {

using namespace std::chrono_literals;

// base64 of the 32 bytes "0123456789abcdef0123456789abcdef".
constexpr char kSecret[] = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
constexpr char kSecretVariable[] = "OUTBOX_RECEIVER_TEST_SECRET";

std::int64_t NowS() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The receiver in a child process. Its stdout (the port) comes through a
// pipe; its stderr (the log) goes to the test's.
class ReceiverProcess {
 public:
  explicit ReceiverProcess(std::vector<std::string> args) {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    const std::string program = OUTBOX_RECEIVER;
    args.insert(args.begin(), program);
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const int spawned =
        posix_spawn(&pid_, program.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    out_ = out[0];
    if (spawned != 0) {
      pid_ = -1;
      throw std::runtime_error("cannot start " + program);
    }
  }

  ~ReceiverProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(out_);
  }
  ReceiverProcess(const ReceiverProcess&) = delete;
  ReceiverProcess& operator=(const ReceiverProcess&) = delete;

  // The port it printed; 0 if it printed none within `limit` (it failed).
  int ReadPort(std::chrono::milliseconds limit = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    std::string line;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd fd{out_, POLLIN, 0};
      if (left.count() <= 0 || poll(&fd, 1, static_cast<int>(left.count())) <= 0) return 0;
      char c = 0;
      if (read(out_, &c, 1) != 1) return 0;
      if (c == '\n') return std::stoi(line);
      line += c;
    }
  }

  // SIGTERM, then the exit status (-1 if it had to be killed after `limit`).
  int Stop(std::chrono::milliseconds limit = 10s) {
    kill(pid_, SIGTERM);
    int status = 0;
    const bool exited = WaitFor([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, limit);
    if (!exited) return -1;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // The exit status once it ends by itself; -1 if it still runs after `limit`.
  int WaitExit(std::chrono::milliseconds limit = 10s) {
    int status = 0;
    if (!WaitFor([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, limit)) return -1;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

// One integer field of the /stats JSON.
std::int64_t StatField(const std::string& json, const std::string& name) {
  std::smatch match;
  if (!std::regex_search(json, match, std::regex("\"" + name + "\":(\\d+)"))) return -1;
  return std::stoll(match[1].str());
}

class ReceiverTest : public AgentTest {
 protected:
  ReceiverTest() : receiver_db_(dir_.File("receiver.db")) {}

  // Starts the receiver on a free port with `extra` flags.
  void StartReceiver(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--db", receiver_db_, "--listen", "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    receiver_ = std::make_unique<ReceiverProcess>(args);
    port_ = receiver_->ReadPort();
    ASSERT_GT(port_, 0) << "the receiver printed no port";
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
  }

  // POSTs `body` with `key` (and `headers`); returns the status, 0 if none.
  int Post(const std::string& key, const std::string& body = R"({"order":1})",
           httplib::Headers headers = {}) {
    if (!key.empty()) headers.emplace("Idempotency-Key", key);
    const auto result = client_->Post("/orders", headers, body, "application/json");
    return result ? result->status : 0;
  }

  std::string Stats() {
    const auto result = client_->Get("/stats");
    return result ? result->body : "";
  }

  std::int64_t Query(const std::string& sql) {
    SQLite::Database db(receiver_db_, SQLite::OPEN_READONLY, 5000);
    SQLite::Statement q(db, sql);
    q.executeStep();
    return q.getColumn(0).getInt64();
  }

  std::string receiver_db_;
  std::unique_ptr<ReceiverProcess> receiver_;
  int port_ = 0;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ReceiverTest, AppliesEachKeyOnceAnswersDuplicatesWith200AndStopsOnSigterm) {
  StartReceiver();
  EXPECT_EQ(Post("k1"), 200);
  EXPECT_EQ(Post("k1"), 200);
  EXPECT_EQ(Post("k2"), 200);
  EXPECT_EQ(Post(""), 400);  // no Idempotency-Key: refused, permanently
  const std::string stats = Stats();
  EXPECT_EQ(StatField(stats, "received"), 4) << stats;
  EXPECT_EQ(StatField(stats, "applied"), 2) << stats;
  EXPECT_EQ(StatField(stats, "duplicates"), 1) << stats;
  EXPECT_EQ(StatField(stats, "bad_requests"), 1) << stats;
  EXPECT_EQ(receiver_->Stop(), 0);
  EXPECT_EQ(Query("SELECT count(*) FROM orders_received"), 2);
  EXPECT_EQ(Query("SELECT count(*) FROM orders_received WHERE message_id = 'k1'"), 1);
  EXPECT_EQ(Query("SELECT count(*) FROM outbox_inbox"), 2);
}

TEST_F(ReceiverTest, RemembersKeysAcrossARestart) {
  StartReceiver();
  EXPECT_EQ(Post("k1"), 200);
  ASSERT_EQ(receiver_->Stop(), 0);
  StartReceiver();
  EXPECT_EQ(Post("k1"), 200);
  EXPECT_EQ(StatField(Stats(), "duplicates"), 1);
  ASSERT_EQ(receiver_->Stop(), 0);
  EXPECT_EQ(Query("SELECT count(*) FROM orders_received"), 1);
}

TEST_F(ReceiverTest, RefusesUnsignedForgedAndStaleRequestsWhenASecretIsSet) {
  ASSERT_EQ(setenv(kSecretVariable, kSecret, 1), 0);
  StartReceiver({"--signing-secret", std::string("env:") + kSecretVariable});
  const std::vector<std::string> secrets = {kSecret};
  const std::string body = R"({"order":7})";
  const auto signed_headers = [&](const std::string& id, std::int64_t timestamp,
                                  const std::string& signed_body) {
    return httplib::Headers{
        {"webhook-id", id},
        {"webhook-timestamp", std::to_string(timestamp)},
        {"webhook-signature", transport::WebhookSignature(secrets, id, timestamp, signed_body)}};
  };
  EXPECT_EQ(Post("k1", body), 401);                                          // unsigned
  EXPECT_EQ(Post("k1", body, signed_headers("k1", NowS(), "{}")), 401);      // other body
  EXPECT_EQ(Post("k1", body, signed_headers("k1", NowS() - 3600, body)), 401);  // replayed
  EXPECT_EQ(Query("SELECT count(*) FROM outbox_inbox"), 0);
  EXPECT_EQ(Post("k1", body, signed_headers("k1", NowS(), body)), 200);
  EXPECT_EQ(StatField(Stats(), "bad_signatures"), 3);
  EXPECT_EQ(StatField(Stats(), "applied"), 1);
  EXPECT_EQ(receiver_->Stop(), 0);
}

TEST_F(ReceiverTest, AnswersServiceUnavailableWhileTheOutageFileExists) {
  const std::string outage = dir_.File("outage");
  StartReceiver({"--outage-file", outage});
  std::ofstream(outage).put('\n');
  EXPECT_EQ(Post("k1"), 503);
  EXPECT_NE(Stats().find("\"outage\":true"), std::string::npos);
  std::filesystem::remove(outage);
  EXPECT_EQ(Post("k1"), 200);
  const std::string stats = Stats();
  EXPECT_EQ(StatField(stats, "outage_refusals"), 1) << stats;
  EXPECT_EQ(StatField(stats, "applied"), 1) << stats;
  EXPECT_EQ(receiver_->Stop(), 0);
}

TEST_F(ReceiverTest, RefusesBadFlagsWithExitStatus2) {
  ReceiverProcess bad_ratio({"--db", receiver_db_, "--fail-ratio", "2"});
  EXPECT_EQ(bad_ratio.WaitExit(), 2);
  ReceiverProcess bad_listen({"--db", receiver_db_, "--listen", "127.0.0.1"});
  EXPECT_EQ(bad_listen.WaitExit(), 2);
  ReceiverProcess bad_secret({"--db", receiver_db_, "--signing-secret", "env:OUTBOX_UNSET_VAR"});
  EXPECT_EQ(bad_secret.WaitExit(), 2);
}

// The whole pattern in one test: an application commits orders with their
// messages, an in-process Agent pushes them, the receiver drops 10% before
// applying and loses the answer of 30% after applying. Every order is
// applied exactly once; each lost answer came back as exactly one absorbed
// duplicate.
TEST_F(ReceiverTest, AnAgentsRetriesThroughLostAnswersApplyEveryOrderOnce) {
  ASSERT_EQ(setenv(kSecretVariable, kSecret, 1), 0);
  StartReceiver({"--signing-secret", std::string("env:") + kSecretVariable, "--fail-ratio", "0.1",
                 "--lose-ack-ratio", "0.3", "--seed", "8"});
  Options options = BaseOptions();
  options.sweep_interval_ms = 20;
  TopicOptions topic;
  topic.endpoint.url = "http://127.0.0.1:" + std::to_string(port_) + "/orders";
  topic.endpoint.signing_secrets = {kSecret};
  topic.retry.backoff = store::Backoff::kFixed;
  topic.retry.first_interval_ms = 20;
  topic.retry.max_attempts = 30;
  topic.retry.jitter = 0;
  topic.breaker.open_ms = 20;
  topic.breaker.max_open_ms = 100;
  options.topics["order.created"] = topic;
  Agent agent(options);
  agent.Start();
  constexpr int kOrders = 100;
  for (int i = 0; i < kOrders; ++i) {
    Commit(&agent, "order.created", "order-" + std::to_string(i),
           R"({"order":)" + std::to_string(i) + "}");
  }
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == kOrders; }, 30s))
      << CountStatus(store::Status::kDelivered) << " delivered; receiver: " << Stats();
  agent.Stop();
  EXPECT_EQ(CountStatus(store::Status::kDead), 0);
  const std::string stats = Stats();
  EXPECT_EQ(StatField(stats, "applied"), kOrders) << stats;
  EXPECT_GT(StatField(stats, "lost_acks"), 0) << stats;
  EXPECT_EQ(StatField(stats, "duplicates"), StatField(stats, "lost_acks")) << stats;
  EXPECT_EQ(StatField(stats, "bad_signatures"), 0) << stats;
  EXPECT_EQ(receiver_->Stop(), 0);
  EXPECT_EQ(Query("SELECT count(*) FROM orders_received"), kOrders);
  EXPECT_EQ(Query("SELECT count(DISTINCT message_id) FROM orders_received"), kOrders);
}

}  // namespace
}  // namespace outbox::agent::testing
