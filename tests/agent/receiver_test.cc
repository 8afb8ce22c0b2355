// outbox-receiver, the example receiver built on store::Inbox, run as a real
// process: exactly-once application, signatures, the simulated outage, a
// clean stop on SIGTERM, and an in-process Agent delivering to it through
// lost acknowledgements (the demo's flow without outboxd).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <regex>

#include "agent_fixture.h"

extern char** environ;

namespace outbox::agent::testing {
namespace {

// Memory bounds are judged in the plain build only: a sanitizer's quarantine
// keeps freed memory resident.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kMemoryBoundsJudged = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kMemoryBoundsJudged = false;
#else
constexpr bool kMemoryBoundsJudged = true;
#endif
#else
constexpr bool kMemoryBoundsJudged = true;
#endif

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

  pid_t pid() const { return pid_; }

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

// A /proc/PID/status field in KiB (VmRSS, VmHWM); -1 if missing.
std::int64_t ProcessKib(pid_t pid, const std::string& field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  }
  return -1;
}

// `size` zero bytes, gzip-compressed (a few hundred KB for 128 MiB).
std::string GzipZeros(std::size_t size) {
  z_stream z{};
  if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2 failed");
  }
  const std::string zeros(1 << 20, '\0');
  std::string out;
  char buffer[1 << 16];
  for (std::size_t left = size; left > 0 || z.avail_in > 0;) {
    const bool last = left <= zeros.size();
    const std::size_t take = std::min(left, zeros.size());
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zeros.data()));
    z.avail_in = static_cast<uInt>(take);
    left -= take;
    int rc = Z_OK;
    do {
      z.next_out = reinterpret_cast<Bytef*>(buffer);
      z.avail_out = sizeof buffer;
      rc = deflate(&z, last ? Z_FINISH : Z_NO_FLUSH);
      out.append(buffer, sizeof buffer - z.avail_out);
    } while (z.avail_out == 0 || (last && rc != Z_STREAM_END));
    if (last) break;
  }
  deflateEnd(&z);
  return out;
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

  // Standard Webhooks headers for `body` under `id`, signed now.
  static httplib::Headers Signed(const std::string& id, const std::string& body) {
    const std::vector<std::string> secrets = {kSecret};
    return httplib::Headers{
        {"webhook-id", id},
        {"webhook-timestamp", std::to_string(NowS())},
        {"webhook-signature", transport::WebhookSignature(secrets, id, NowS(), body)}};
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

// Issue #27, finding 4: a captured signed request replayed under fresh
// Idempotency-Keys, and members of a signed batch sent again alone. On the
// old receiver each replay was applied again (the key was the unsigned
// Idempotency-Key).
class HostileReceiverTest : public ReceiverTest {};

TEST_F(HostileReceiverTest, AReplayedSignedRequestIsAppliedOnceWhateverItsIdempotencyKey) {
  ASSERT_EQ(setenv(kSecretVariable, kSecret, 1), 0);
  StartReceiver({"--signing-secret", std::string("env:") + kSecretVariable});
  const std::string body = R"({"order":7})";
  const httplib::Headers captured = Signed("msg-1", body);
  EXPECT_EQ(Post("msg-1", body, captured), 200);
  EXPECT_EQ(Post("replay-1", body, captured), 400);  // disagrees with webhook-id
  EXPECT_EQ(Post("replay-2", body, captured), 400);
  EXPECT_EQ(Post("", body, captured), 200);  // no Idempotency-Key: webhook-id decides
  EXPECT_EQ(Query("SELECT count(*) FROM orders_received"), 1);
  const std::string stats = Stats();
  EXPECT_EQ(StatField(stats, "applied"), 1) << stats;
  EXPECT_EQ(StatField(stats, "duplicates"), 1) << stats;
  EXPECT_EQ(StatField(stats, "bad_requests"), 2) << stats;
  EXPECT_EQ(receiver_->Stop(), 0);
}

TEST_F(HostileReceiverTest, BatchMembersAreKeyedByTheirSignedIdsNotTheBatchId) {
  ASSERT_EQ(setenv(kSecretVariable, kSecret, 1), 0);
  StartReceiver({"--signing-secret", std::string("env:") + kSecretVariable});
  const std::string batch = "{\"id\":\"m1\",\"topic\":\"t\",\"payload\":{\"n\":1}}\n"
                            "{\"id\":\"m2\",\"topic\":\"t\",\"payload\":{\"n\":2}}\n";
  httplib::Headers headers = Signed("batch-1", batch);
  headers.emplace("Idempotency-Key", "batch-1");
  auto result = client_->Post("/orders", headers, batch, "application/x-ndjson");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200) << result->body;
  // The same batch under another batch id, and one member alone: nothing new.
  result = client_->Post("/orders", Signed("batch-2", batch), batch, "application/x-ndjson");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200) << result->body;
  const std::string alone = R"({"n":2})";
  EXPECT_EQ(Post("m2", alone, Signed("m2", alone)), 200);
  // A member without an id is refused as a whole.
  const std::string no_id = "{\"topic\":\"t\"}\n";
  result = client_->Post("/orders", Signed("batch-3", no_id), no_id, "application/x-ndjson");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 400);
  EXPECT_EQ(Query("SELECT count(*) FROM orders_received"), 2);
  EXPECT_EQ(Query("SELECT count(*) FROM outbox_inbox WHERE key IN ('m1', 'm2')"), 2);
  EXPECT_EQ(receiver_->Stop(), 0);
}

// Finding 5: an unsigned chunked body and a gzip bomb, each 128 MiB once
// read, cost the receiver at most its 8 MiB body limit. The old receiver
// read both whole before answering 401 (its RSS grew by more than the body).
TEST_F(HostileReceiverTest, ChunkedAndCompressedBodiesStopAtTheLimitBeforeTheSignature) {
  ASSERT_EQ(setenv(kSecretVariable, kSecret, 1), 0);
  StartReceiver({"--signing-secret", std::string("env:") + kSecretVariable});
  ASSERT_EQ(Stats().empty(), false);
  const std::int64_t before_kib = ProcessKib(receiver_->pid(), "VmRSS");
  constexpr std::size_t kHuge = std::size_t{128} << 20;
  {
    httplib::Client chunked("127.0.0.1", port_);
    const std::string piece(1 << 16, 'x');
    std::size_t sent = 0;
    chunked.Post(
        "/orders", {{"Idempotency-Key", "k"}},
        [&](std::size_t, httplib::DataSink& sink) {
          if (sent >= kHuge) {
            sink.done();
            return true;
          }
          sent += piece.size();
          return sink.write(piece.data(), piece.size());
        },
        "application/json");
  }
  {
    httplib::Client bomb("127.0.0.1", port_);
    const httplib::Headers headers = {{"Idempotency-Key", "k"}, {"Content-Encoding", "gzip"}};
    const auto result = bomb.Post("/orders", headers, GzipZeros(kHuge), "application/json");
    if (result) {
      EXPECT_EQ(result->status, 413);
    }
  }
  const std::string stats = Stats();
  EXPECT_EQ(StatField(stats, "too_large"), 2) << stats;
  EXPECT_EQ(StatField(stats, "bad_signatures"), 0) << stats;  // refused before the signature
  const std::int64_t peak_kib = ProcessKib(receiver_->pid(), "VmHWM");
  const char* not_judged =
      outbox::testing::Emulated()
          ? "under emulation (qemu-user's own memory grows as it translates code)"
      : !kMemoryBoundsJudged ? "in a sanitizer build (ASan keeps freed memory in quarantine)"
                             : nullptr;
  if (not_judged == nullptr) {
    EXPECT_LT(peak_kib - before_kib, 40 * 1024) << "peak " << peak_kib << " KiB, before "
                                                << before_kib << " KiB";
  } else {
    std::printf("memory bound not judged %s: peak %lld KiB, before %lld KiB\n", not_judged,
                static_cast<long long>(peak_kib), static_cast<long long>(before_kib));
  }
  EXPECT_EQ(receiver_->Stop(), 0);
}

// Sends `request` as it is on a new connection; returns the status line of
// the answer ("" if none within 10 s).
std::string RawExchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string answer;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    pollfd ready{fd, POLLIN, 0};
    char buffer[512];
    while (answer.find("\r\n") == std::string::npos && poll(&ready, 1, 10'000) == 1) {
      const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      answer.append(buffer, static_cast<std::size_t>(n));
    }
  }
  close(fd);
  return answer.substr(0, answer.find("\r\n"));
}

// A body announced longer than the limit is refused on its headers alone
// (the old receiver waited to skip a gigabyte), and a GET that announces a
// body is refused rather than read.
TEST_F(HostileReceiverTest, ABodyAnnouncedTooLongAndAGetWithABodyAreRefusedUnread) {
  StartReceiver();
  EXPECT_EQ(RawExchange(port_,
                        "POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k\r\n"
                        "Content-Length: 1073741824\r\n\r\n"),
            "HTTP/1.1 413 Payload Too Large");
  EXPECT_EQ(RawExchange(port_, "GET /stats HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"),
            "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(Query("SELECT count(*) FROM orders_received"), 0);
  EXPECT_EQ(receiver_->Stop(), 0);
}

}  // namespace
}  // namespace outbox::agent::testing
