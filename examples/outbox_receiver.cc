// outbox-receiver: an example receiver built on store::Inbox (docs/receiving.md,
// the receiving side of the pattern).
//
// Every POST is one message (a batch: one per member). It is applied to this
// program's own SQLite table, orders_received, and its key (the
// Idempotency-Key; with --signing-secret the signed webhook-id; a batch
// member's own id) is recorded by the Inbox in the same transaction, so a message sent again (the sender never saw our
// 2xx) is answered 200 without being applied a second time. orders_received
// has no unique constraint of its own: only the inbox stands between a
// redelivery and a second row, which makes double application visible.
//
// For demos and tests it can misbehave on purpose: --outage-file (503 while
// the file exists), --fail-ratio (500 before applying) and --lose-ack-ratio
// (apply and commit, then answer 500 as if the answer had been lost: the
// sender retries and the inbox absorbs the duplicate).
//
// stdout: one line, the port it listens on (for --listen HOST:0). stderr:
// the log. GET /stats: counters as JSON. GET /keys?source=&since=&until=:
// the Idempotency-Keys received in [since, until) (ms since the epoch) from
// that source (the ce-source header of binary CloudEvents; no source: all),
// one per line, for the sender's `outboxctl reconcile --receiver-keys`. With
// --signing-secret it is authenticated like a POST: a Standard Webhooks
// signature whose webhook-id is the request target (path and query) and
// whose body is empty. SIGTERM/SIGINT: stop accepting,
// finish the requests in progress, exit 0.
// Exit status: 0 after a clean stop, 1 when the database or the network
// fails, 2 for bad flags.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <httplib.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <charconv>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "outbox/store.h"
#include "outbox/transport.h"
#include "receiver_messages.h"
#include "util/clock.h"
#include "util/listen_address.h"
#include "util/printable.h"

namespace {

using outbox::receiver::ReceivedMessage;
using outbox::receiver::RequestIdentity;
using outbox::receiver::Split;
using outbox::receiver::SplitRequest;
using outbox::store::Inbox;
using outbox::store::Receipt;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// Larger bodies, counted decoded, are refused (413) before any signature
// work; the sender's default max_payload_bytes is 1 MiB.
constexpr std::size_t kMaxBodyBytes = 8 << 20;
// Keys deleted per purge statement: each is one short write transaction.
constexpr int kPurgeBatch = 1000;

// The example application's own table: one row per applied message.
constexpr char kCreateOrdersReceived[] = R"sql(
CREATE TABLE IF NOT EXISTS orders_received(
  id          INTEGER PRIMARY KEY,
  message_id  TEXT NOT NULL,     -- the Idempotency-Key
  path        TEXT NOT NULL,     -- where it was POSTed
  body        BLOB NOT NULL,
  applied_at  INTEGER NOT NULL   -- ms since the epoch, when it was applied
))sql";
constexpr char kApply[] =
    "INSERT INTO orders_received(message_id, path, body, applied_at) VALUES(?, ?, ?, ?)";

struct ReceiverOptions {
  std::string db_path;                // the receiver's SQLite file; created if missing
  std::string listen = "127.0.0.1:0";  // HOST:PORT; port 0 = any free port
  // Standard Webhooks secrets, resolved; empty = signatures are not checked.
  std::vector<std::string> signing_secrets;
  std::int64_t signature_tolerance_s = 300;  // webhook-timestamp vs now, s
  std::string outage_file;                   // while it exists: 503
  double fail_ratio = 0;                     // share answered 500 before applying
  double lose_ack_ratio = 0;                 // share answered 500 after applying
  // Keys older than this are purged, ms. Must outlast the sender's longest
  // retry horizon plus the longest time a device stays offline.
  std::int64_t key_retention_ms = 30LL * 24 * 3'600'000;
  std::int64_t purge_interval_ms = 3'600'000;  // how often the purge runs, ms
  int threads = 8;                             // concurrent connections served
  int busy_timeout_ms = 5000;                  // wait for SQLite's write lock, ms
  std::optional<unsigned> seed;                // for --fail-ratio / --lose-ack-ratio
};

using outbox::util::NowMs;
// Paths and keys are the peer's: escaped before they reach the log.
std::string Printable(std::string_view text) { return outbox::util::EscapeControls(text); }

struct Counters {
  std::atomic<std::int64_t> received{0};           // POSTs that reached a handler
  std::atomic<std::int64_t> applied{0};            // first deliveries, applied
  std::atomic<std::int64_t> duplicates{0};         // redeliveries absorbed by the inbox
  std::atomic<std::int64_t> outage_refusals{0};    // 503 while the outage file exists
  std::atomic<std::int64_t> injected_failures{0};  // 500 from --fail-ratio
  std::atomic<std::int64_t> lost_acks{0};          // 500 after applying (--lose-ack-ratio)
  std::atomic<std::int64_t> bad_signatures{0};     // 401
  std::atomic<std::int64_t> bad_requests{0};       // 400: no or bad key, a bad batch
  std::atomic<std::int64_t> too_large{0};          // 413: a body over kMaxBodyBytes
  std::atomic<std::int64_t> errors{0};             // 503: the database failed
};

// One connection per request in progress: an SQLite connection (and its
// Inbox) is never used by two threads at once. Connections are kept for the
// next request, so their statements stay prepared.
class Connections {
 public:
  struct Connection {
    Connection(const std::string& path, int busy_timeout_ms)
        : db(path, SQLite::OPEN_READWRITE, busy_timeout_ms), inbox(db), apply(db, kApply) {}
    SQLite::Database db;
    Inbox inbox;
    SQLite::Statement apply;
  };

  // Returns the connection to the pool when it goes out of scope, unless
  // Discard() was called (a connection whose ROLLBACK failed).
  class Lease {
   public:
    Lease(Connections& pool, std::unique_ptr<Connection> connection)
        : pool_(pool), connection_(std::move(connection)) {}
    ~Lease() {
      if (connection_) pool_.Return(std::move(connection_));
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Connection* operator->() { return connection_.get(); }
    void Discard() { connection_.reset(); }

   private:
    Connections& pool_;
    std::unique_ptr<Connection> connection_;
  };

  Connections(std::string path, int busy_timeout_ms)
      : path_(std::move(path)), busy_timeout_ms_(busy_timeout_ms) {}

  // Throws SQLite::Exception or outbox::store::StoreError when a new
  // connection cannot be opened.
  Lease Borrow() {
    {
      std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        std::unique_ptr<Connection> connection = std::move(idle_.back());
        idle_.pop_back();
        return Lease(*this, std::move(connection));
      }
    }
    return Lease(*this, std::make_unique<Connection>(path_, busy_timeout_ms_));
  }

 private:
  void Return(std::unique_ptr<Connection> connection) {
    std::lock_guard lock(mutex_);
    idle_.push_back(std::move(connection));
  }

  const std::string path_;
  const int busy_timeout_ms_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Connection>> idle_;  // guarded by mutex_
};

// Applies each message exactly once: every key and its message's row commit
// together, or none does. Returns how many were new. Throws what SQLite or
// the Inbox throws, after rolling back.
int Apply(Connections::Lease& connection, const std::vector<ReceivedMessage>& messages,
          const std::string& path) {
  SQLite::Database& db = connection->db;
  // IMMEDIATE: the write lock up front, so the INSERT never meets a stale
  // snapshot and the busy timeout covers every wait.
  db.exec("BEGIN IMMEDIATE");
  try {
    const std::int64_t now = NowMs();
    int applied = 0;
    for (const ReceivedMessage& message : messages) {
      std::optional<std::string_view> source;
      if (message.source) source = *message.source;
      if (connection->inbox.Record(message.key, now, source) != Receipt::kNew) continue;
      SQLite::Statement& apply = connection->apply;
      apply.bind(1, message.key);
      apply.bind(2, path);
      apply.bind(3, static_cast<const void*>(message.body.data()),
                 static_cast<int>(message.body.size()));
      apply.bind(4, static_cast<std::int64_t>(now));
      apply.exec();
      apply.tryReset();
      apply.clearBindings();
      ++applied;
    }
    db.exec("COMMIT");
    return applied;
  } catch (...) {
    connection->apply.tryReset();
    try {
      db.exec("ROLLBACK");
    } catch (...) {
      connection.Discard();  // its state is unknown: do not hand it out again
    }
    throw;
  }
}

// Reads the body through `reader`, decoded (cpp-httplib decodes gzip and
// deflate as it reads), and stops at kMaxBodyBytes of decoded bytes: the
// limit holds for chunked and compressed bodies alike, before any signature
// work. nullopt when the body is larger.
std::optional<std::string> ReadBoundedBody(const httplib::ContentReader& reader) {
  std::string body;
  bool too_large = false;
  const bool read = reader([&](const char* data, std::size_t length) {
    if (length > kMaxBodyBytes - body.size()) {
      too_large = true;
      return false;
    }
    body.append(data, length);
    return true;
  });
  if (too_large) return std::nullopt;
  if (!read) throw std::runtime_error("reading the request body failed");
  return body;
}

// A Content-Length of at most kMaxBodyBytes (false for anything else).
bool FitsTheLimit(std::string_view length) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(length.data(), length.data() + length.size(), value);
  return error == std::errc() && end == length.data() + length.size() && value <= kMaxBodyBytes;
}

// Before routing, so before any body is read: a request that could only
// cost memory is answered at once and its connection closed (the unread
// body would otherwise be taken for the next request).
httplib::Server::HandlerResponse RefuseUnreadable(const httplib::Request& request,
                                                  httplib::Response& response) {
  const std::string length = request.get_header_value("Content-Length");
  const bool has_body = request.has_header("Transfer-Encoding") ||
                        (!length.empty() && length != "0");
  std::string refusal;
  if (request.method != "POST" && has_body) {
    response.status = 400;
    refusal = "a " + request.method + " request carries no body here\n";
  } else if (request.method == "POST" && !length.empty() && !FitsTheLimit(length)) {
    response.status = 413;
    refusal = "body: larger than " + std::to_string(kMaxBodyBytes) + " bytes\n";
  } else {
    return httplib::Server::HandlerResponse::Unhandled;
  }
  response.set_header("Connection", "close");
  response.set_content(refusal, "text/plain");
  return httplib::Server::HandlerResponse::Handled;
}

class Receiver {
 public:
  Receiver(ReceiverOptions options, std::shared_ptr<spdlog::logger> logger)
      : options_(std::move(options)),
        logger_(std::move(logger)),
        connections_(options_.db_path, options_.busy_timeout_ms),
        random_(options_.seed ? *options_.seed : std::random_device{}()) {}

  // Registers the routes on `server`.
  void Route(httplib::Server& server) {
    server.Get("/stats", [this](const httplib::Request&, httplib::Response& response) {
      response.set_content(StatsJson(), "application/json");
    });
    server.Get("/keys", [this](const httplib::Request& request, httplib::Response& response) {
      try {
        ExportKeys(request, response);
      } catch (const std::exception& e) {
        ++counters_.errors;
        logger_->error("path=/keys error={}", e.what());
        response.status = 503;
        response.set_content("error\n", "text/plain");
      }
    });
    server.Get("/healthz", [](const httplib::Request&, httplib::Response& response) {
      response.set_content("ok\n", "text/plain");
    });
    server.Post(".*", [this](const httplib::Request& request, httplib::Response& response,
                             const httplib::ContentReader& reader) {
      // No exception may reach httplib's thread.
      try {
        Deliver(request, reader, response);
      } catch (const std::exception& e) {
        ++counters_.errors;
        logger_->error("path={} error={}", Printable(request.path), e.what());
        response.status = 503;
        response.set_content("error\n", "text/plain");
      }
    });
  }

  std::string StatsJson() const {
    const auto field = [](const char* name, const std::atomic<std::int64_t>& value) {
      return std::string("\"") + name + "\":" + std::to_string(value.load());
    };
    return "{" + field("received", counters_.received) + "," +
           field("applied", counters_.applied) + "," +
           field("duplicates", counters_.duplicates) + "," +
           field("outage_refusals", counters_.outage_refusals) + "," +
           field("injected_failures", counters_.injected_failures) + "," +
           field("lost_acks", counters_.lost_acks) + "," +
           field("bad_signatures", counters_.bad_signatures) + "," +
           field("bad_requests", counters_.bad_requests) + "," +
           field("too_large", counters_.too_large) + "," + field("errors", counters_.errors) +
           ",\"outage\":" + (InOutage() ? "true" : "false") + "}";
  }

 private:
  bool InOutage() const {
    std::error_code ignored;
    return !options_.outage_file.empty() &&
           std::filesystem::exists(options_.outage_file, ignored);
  }

  bool Chance(double ratio) {
    if (ratio <= 0) return false;
    std::lock_guard lock(random_mutex_);
    return std::uniform_real_distribution<double>(0, 1)(random_) < ratio;
  }

  // False (and a 401 answered) when signatures are required and this one
  // does not verify.
  bool SignatureAccepted(const httplib::Request& request, std::string_view body,
                         httplib::Response& response) {
    if (options_.signing_secrets.empty()) return true;
    const auto check = outbox::transport::VerifyWebhookSignature(
        options_.signing_secrets, request.get_header_value("webhook-id"),
        request.get_header_value("webhook-timestamp"), body,
        request.get_header_value("webhook-signature"), NowMs() / 1000,
        options_.signature_tolerance_s);
    if (check == outbox::transport::SignatureCheck::kValid) return true;
    ++counters_.bad_signatures;
    const std::string_view why = outbox::transport::SignatureCheckName(check);
    logger_->warn("path={} signature={}", Printable(request.path), why);
    response.status = 401;
    response.set_content("signature: " + std::string(why) + "\n", "text/plain");
    return false;
  }

  // GET /keys: the request target is what is signed, so a signature for one
  // window or source cannot be replayed for another.
  void ExportKeys(const httplib::Request& request, httplib::Response& response) {
    if (!options_.signing_secrets.empty() &&
        request.get_header_value("webhook-id") != request.target) {
      ++counters_.bad_signatures;
      response.status = 401;
      response.set_content("signature: webhook-id must be the request target\n", "text/plain");
      return;
    }
    if (!SignatureAccepted(request, "", response)) return;
    const auto bound = [&](const char* name, std::int64_t fallback) -> std::optional<std::int64_t> {
      if (!request.has_param(name)) return fallback;
      const std::string text = request.get_param_value(name);
      std::int64_t value = 0;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
      return value;
    };
    const std::optional<std::int64_t> since = bound("since", 0);
    const std::optional<std::int64_t> until = bound("until", INT64_MAX);
    if (!since || !until) {
      ++counters_.bad_requests;
      response.status = 400;
      response.set_content("since, until: expected ms since the epoch\n", "text/plain");
      return;
    }
    std::optional<std::string> source;
    if (request.has_param("source")) source = request.get_param_value("source");
    std::string keys;
    Connections::Lease connection = connections_.Borrow();
    connection->inbox.ExportKeys(source, *since, *until, [&](std::string_view key) {
      keys += key;
      keys += '\n';
    });
    response.set_content(keys, "text/plain");
  }

  // What the request carries, each message with its key; false (and a 400
  // answered) when the request is refused.
  bool Messages(const httplib::Request& request, const std::string& body,
                std::vector<ReceivedMessage>& messages, httplib::Response& response) {
    const RequestIdentity identity{request.get_header_value("Content-Type"),
                                   request.get_header_value("Idempotency-Key"),
                                   request.get_header_value("webhook-id"),
                                   request.get_header_value("ce-source")};
    Split split = SplitRequest(identity, body, !options_.signing_secrets.empty());
    if (!split.refusal.empty()) {
      ++counters_.bad_requests;
      logger_->warn("path={} refused: {}", Printable(request.path), split.refusal);
      response.status = 400;
      response.set_content(split.refusal + "\n", "text/plain");
      return false;
    }
    messages = std::move(split.messages);
    return true;
  }

  void Deliver(const httplib::Request& request, const httplib::ContentReader& reader,
               httplib::Response& response) {
    ++counters_.received;
    // Decoded as it is read (gzip too), and bounded: the signature covers
    // the decoded body.
    const std::optional<std::string> body = ReadBoundedBody(reader);
    if (!body) {
      ++counters_.too_large;
      response.status = 413;
      response.set_header("Connection", "close");
      response.set_content("body: larger than " + std::to_string(kMaxBodyBytes) + " bytes\n",
                           "text/plain");
      return;
    }
    if (InOutage()) {
      ++counters_.outage_refusals;
      response.status = 503;
      response.set_content("outage (simulated)\n", "text/plain");
      return;
    }
    if (!SignatureAccepted(request, *body, response)) return;
    std::vector<ReceivedMessage> messages;
    if (!Messages(request, *body, messages, response)) return;
    if (Chance(options_.fail_ratio)) {
      ++counters_.injected_failures;
      response.status = 500;
      response.set_content("failure (simulated)\n", "text/plain");
      return;
    }
    int applied = 0;
    try {
      Connections::Lease connection = connections_.Borrow();
      applied = Apply(connection, messages, request.path);
    } catch (const std::invalid_argument& e) {  // a key the Inbox refuses
      ++counters_.bad_requests;
      response.status = 400;
      response.set_content(std::string(e.what()) + "\n", "text/plain");
      return;
    }
    const int duplicates = static_cast<int>(messages.size()) - applied;
    counters_.applied += applied;
    counters_.duplicates += duplicates;
    logger_->debug("key={} applied={} duplicates={}", Printable(messages.front().key), applied,
                   duplicates);
    if (Chance(options_.lose_ack_ratio)) {
      ++counters_.lost_acks;
      response.status = 500;
      response.set_content("applied, but this answer is lost (simulated)\n", "text/plain");
      return;
    }
    if (messages.size() == 1) {
      response.set_content(applied == 1 ? "{\"status\":\"applied\"}" : "{\"status\":\"duplicate\"}",
                           "application/json");
    } else {
      response.set_content("{\"applied\":" + std::to_string(applied) +
                               ",\"duplicates\":" + std::to_string(duplicates) + "}",
                           "application/json");
    }
  }

  const ReceiverOptions options_;
  std::shared_ptr<spdlog::logger> logger_;
  Connections connections_;
  Counters counters_;
  std::mutex random_mutex_;
  std::mt19937 random_;  // guarded by random_mutex_
};

// Deletes expired keys every purge_interval_ms on a connection of its own.
// The destructor stops and joins the thread.
class Purger {
 public:
  Purger(const ReceiverOptions& options, std::shared_ptr<spdlog::logger> logger)
      : path_(options.db_path),
        retention_ms_(options.key_retention_ms),
        interval_(options.purge_interval_ms),
        busy_timeout_ms_(options.busy_timeout_ms),
        logger_(std::move(logger)),
        thread_([this](std::stop_token stop) { Run(stop); }) {}

 private:
  void Run(std::stop_token stop) {
    try {
      SQLite::Database db(path_, SQLite::OPEN_READWRITE, busy_timeout_ms_);
      Inbox inbox(db);
      std::mutex mutex;
      std::condition_variable_any wake;
      do {
        const std::int64_t cutoff = NowMs() - retention_ms_;
        int purged = 0;
        for (int n = kPurgeBatch; n == kPurgeBatch && !stop.stop_requested();) {
          n = inbox.Purge(cutoff, kPurgeBatch);
          purged += n;
        }
        if (purged > 0) logger_->info("purged {} expired idempotency keys", purged);
        std::unique_lock lock(mutex);
        wake.wait_for(lock, stop, interval_, [] { return false; });
      } while (!stop.stop_requested());
    } catch (const std::exception& e) {
      // No exception leaves the thread; the receiver goes on without purging.
      logger_->error("key purge stopped: {}", e.what());
    }
  }

  const std::string path_;
  const std::int64_t retention_ms_;
  const std::chrono::milliseconds interval_;
  const int busy_timeout_ms_;
  std::shared_ptr<spdlog::logger> logger_;
  std::jthread thread_;  // last: started once everything above exists
};

// Creates the file, the application's table and the inbox's table, in WAL
// mode. Throws on any failure.
void PrepareDatabase(const ReceiverOptions& options) {
  SQLite::Database db(options.db_path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE,
                      options.busy_timeout_ms);
  db.exec("PRAGMA journal_mode = WAL");
  db.exec(kCreateOrdersReceived);
  Inbox install(db);
}

// "HOST:PORT". Throws std::invalid_argument naming --listen.
outbox::util::ListenAddress ParseListen(const std::string& text) {
  std::optional<outbox::util::ListenAddress> address = outbox::util::ParseListenAddress(text);
  if (!address) {
    throw std::invalid_argument("--listen: expected HOST:PORT with a port 0..65535, got \"" +
                                text + "\"");
  }
  return *address;
}

std::shared_ptr<spdlog::logger> MakeLogger(bool verbose) {
  auto logger = std::make_shared<spdlog::logger>(
      "outbox-receiver", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_formatter(
      std::make_unique<spdlog::pattern_formatter>("%Y-%m-%d %H:%M:%S.%e %l outbox-receiver: %v"));
  logger->set_level(verbose ? spdlog::level::debug : spdlog::level::info);
  logger->flush_on(spdlog::level::trace);
  return logger;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread exists, so that every thread inherits the mask and the
  // signals reach only sigwait() below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  ReceiverOptions options;
  std::vector<std::string> secret_references;
  std::uint64_t seed = 0;
  bool verbose = false;
  CLI::App app{"Example receiver: applies each message exactly once with store::Inbox",
               "outbox-receiver"};
  app.add_option("--db", options.db_path, "the receiver's SQLite file (created if missing)")
      ->required();
  app.add_option("--listen", options.listen, "HOST:PORT to listen on; port 0 = any free port")
      ->capture_default_str();
  app.add_option("--signing-secret", secret_references,
                 "verify Standard Webhooks signatures with this secret (env:NAME or file:PATH; "
                 "repeat for rotation)");
  app.add_option("--signature-tolerance-s", options.signature_tolerance_s,
                 "accepted distance of webhook-timestamp from now, s")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--outage-file", options.outage_file,
                 "answer 503 to every message while this file exists");
  app.add_option("--fail-ratio", options.fail_ratio,
                 "share of messages answered 500 before they are applied")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--lose-ack-ratio", options.lose_ack_ratio,
                 "share of messages applied, then answered 500 as if the answer was lost")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--key-retention-ms", options.key_retention_ms,
                 "keep idempotency keys this long; longer than the sender's retry horizon plus "
                 "the longest offline period")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--purge-interval-ms", options.purge_interval_ms,
                 "how often expired keys are purged")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--threads", options.threads, "connections served at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  auto* seed_option = app.add_option("--seed", seed, "seed for the simulated failures");
  app.add_flag("--verbose", verbose, "log every message");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "outbox-receiver: " << e.what() << '\n';
    return kExitUsage;
  }
  if (*seed_option) options.seed = static_cast<unsigned>(seed);

  outbox::util::ListenAddress address;
  try {
    address = ParseListen(options.listen);
    for (const std::string& reference : secret_references) {
      options.signing_secrets.push_back(
          outbox::transport::ResolveSecret(reference, "--signing-secret"));
    }
    // Checks the secrets' form now rather than at the first request.
    outbox::transport::WebhookSignature(options.signing_secrets, "check", 0, "");
  } catch (const std::invalid_argument& e) {
    std::cerr << "outbox-receiver: " << e.what() << '\n';
    return kExitUsage;
  }

  const auto logger = MakeLogger(verbose);
  try {
    PrepareDatabase(options);
  } catch (const std::exception& e) {
    std::cerr << "outbox-receiver: " << options.db_path << ": " << e.what() << '\n';
    return kExitFailure;
  }

  Receiver receiver(options, logger);
  httplib::Server server;
  const std::size_t threads = static_cast<std::size_t>(options.threads);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // Bodies of a known length over the limit: 413 before they are read
  // (RefuseUnreadable); chunked and compressed ones stop at the limit as
  // they are read (ReadBoundedBody).
  server.set_payload_max_length(kMaxBodyBytes);
  server.set_pre_routing_handler(RefuseUnreadable);
  // A sender keeps its connections alive across many messages.
  server.set_keep_alive_max_count(1000);
  receiver.Route(server);
  const int port = address.port == 0 ? server.bind_to_any_port(address.host)
                                     : (server.bind_to_port(address.host, address.port)
                                            ? address.port
                                            : -1);
  if (port <= 0) {
    std::cerr << "outbox-receiver: --listen: cannot listen on " << options.listen << '\n';
    return kExitFailure;
  }
  // The socket already listens: a client may connect from now on.
  std::cout << port << std::endl;
  logger->info("listening on http://{}:{} db={} signatures={} outage_file={}", address.host, port,
               options.db_path, options.signing_secrets.empty() ? "off" : "on",
               options.outage_file.empty() ? "-" : options.outage_file);

  Purger purger(options, logger);
  std::atomic<bool> stopping{false};
  std::atomic<bool> listen_failed{false};
  std::promise<void> listen_done;
  std::future<void> listened = listen_done.get_future();
  std::jthread listener([&] {
    server.listen_after_bind();
    if (!stopping.load()) {
      // Ended on its own: wake main's sigwait.
      listen_failed = true;
      kill(getpid(), SIGTERM);
    }
    listen_done.set_value();
  });

  int signal = 0;
  sigwait(&signals, &signal);
  stopping = true;
  if (!listen_failed.load()) logger->info("{} received: stopping", strsignal(signal));
  // stop() does nothing until the accept loop runs, which a signal right
  // after start can beat: repeat until the listener has left it.
  do {
    server.stop();
  } while (listened.wait_for(std::chrono::milliseconds(10)) == std::future_status::timeout);
  listener.join();
  logger->info("stopped: {}", receiver.StatsJson());
  if (listen_failed.load()) {
    logger->error("the server stopped unexpectedly");
    return kExitFailure;
  }
  return 0;
}
