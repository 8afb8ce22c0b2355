// outboxctl: inspect and repair an outbox database. Links only the store, so
// it is safe to run beside a live outboxd (short transactions, busy timeout).
//
// Exit status: 0 success, 1 the database or the environment failed,
// 2 bad flags or bad input. Errors are one line on stderr.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <sstream>

#include "outbox/store.h"
#include "row_json.h"
#include "util/clock.h"
#include "util/rfc3339.h"

namespace {

using outbox::store::Row;
using outbox::store::Status;
using outbox::store::Store;
using outbox::util::NowMs;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr int kPurgeBatch = 500;

// Seconds from `then_ms` to `now_ms`, in doubles: created_at may hold any
// value another application wrote, and now - INT64_MIN overflows.
double AgeSeconds(std::int64_t now_ms, std::int64_t then_ms) {
  return (static_cast<double>(now_ms) - static_cast<double>(then_ms)) / 1000.0;
}

// Payloads and errors may hold anything; keep table cells on one line.
std::string OneLine(std::string_view text, std::size_t max) {
  std::string out;
  for (char c : text) {
    if (out.size() >= max) {
      out += "…";
      break;
    }
    const auto byte = static_cast<unsigned char>(c);
    out += (byte < 0x20 || byte == 0x7f) ? ' ' : c;
  }
  return out;
}

struct Context {
  std::string db_path;
  bool json = false;
};

Store Open(const Context& context, bool create = false) {
  outbox::store::Options options;
  options.path = context.db_path;
  options.create = create;
  options.cache_kib = 512;
  return Store(options);
}

int RunInit(const Context& context) {
  Store store = Open(context, /*create=*/true);
  std::cout << "initialised " << context.db_path << " (outbox schema "
            << outbox::store::kSchemaVersion << ", database id " << store.database_id() << ")\n";
  return 0;
}

int RunStats(const Context& context) {
  Store store = Open(context);
  const outbox::store::Stats stats = store.GetStats();
  const std::int64_t now = NowMs();
  if (context.json) {
    std::cout << outbox::row_json::StatsToJson(stats, store.database_id(), now) << '\n';
    return 0;
  }
  std::printf("%-32s %-10s %10s %16s\n", "TOPIC", "STATUS", "COUNT", "OLDEST AGE (s)");
  for (const auto& count : stats.counts) {
    std::printf("%-32s %-10s %10lld %16.1f\n", OneLine(count.topic, 32).c_str(),
                std::string(outbox::store::StatusName(count.status)).c_str(),
                static_cast<long long>(count.count),
                AgeSeconds(now, count.oldest_created_at));
  }
  std::printf("\nundelivered %lld (limit %lld)  database %lld bytes (limit %lld)  wal %lld bytes\n",
              static_cast<long long>(stats.undelivered),
              static_cast<long long>(stats.limits.max_pending),
              static_cast<long long>(stats.db_bytes),
              static_cast<long long>(stats.limits.max_db_bytes),
              static_cast<long long>(stats.wal_bytes));
  return 0;
}

// The head of each blocked ordering key (docs/ordering.md): the message its
// key waits for.
std::vector<Row> BlockedHeads(Store& store, const std::string& topic, int limit) {
  std::vector<Row> heads;
  std::int64_t after = 0;
  const std::int64_t now = NowMs();
  while (static_cast<int>(heads.size()) < limit) {
    const std::vector<Row> page = store.BlockedHeads(now, after, limit);
    for (const Row& row : page) {
      if (topic.empty() || row.topic == topic) heads.push_back(row);
    }
    if (static_cast<int>(page.size()) < limit) break;
    after = page.back().id;
  }
  if (static_cast<int>(heads.size()) > limit) heads.resize(static_cast<std::size_t>(limit));
  return heads;
}

int RunList(const Context& context, const std::string& status_name, const std::string& topic,
            int limit, bool blocked) {
  outbox::store::ListFilter filter;
  if (!status_name.empty()) {
    filter.status = outbox::store::ParseStatus(status_name);
    if (!filter.status) {
      throw std::invalid_argument("--status: expected pending, in_flight, delivered or dead, not '" +
                                  status_name + "'");
    }
  }
  if (!topic.empty()) filter.topic = topic;
  filter.limit = limit;
  if (blocked && filter.status) {
    throw std::invalid_argument("--blocked: lists the heads of blocked keys; drop --status");
  }
  Store store = Open(context);
  const std::vector<Row> rows = blocked ? BlockedHeads(store, topic, limit) : store.List(filter);
  if (context.json) {
    std::cout << outbox::row_json::RowsToJson(rows) << '\n';
    return 0;
  }
  std::printf("%-8s %-24s %-24s %-10s %8s  %-24s %s\n", "ID", "TOPIC", "KEY", "STATUS",
              "ATTEMPTS", "NEXT ATTEMPT", "LAST ERROR");
  for (const Row& row : rows) {
    std::printf("%-8lld %-24s %-24s %-10s %8d  %-24s %s\n", static_cast<long long>(row.id),
                OneLine(row.topic, 24).c_str(), OneLine(row.key, 24).c_str(),
                std::string(outbox::store::StatusName(row.status)).c_str(), row.attempts,
                outbox::util::FormatRfc3339(row.next_attempt_at).c_str(),
                OneLine(row.last_error.value_or(""), 60).c_str());
  }
  return 0;
}

// What keeps a pending row from being sent, in words.
std::string WaitsFor(Store& store, const Row& row) {
  if (row.status != Status::kPending) return "-";
  if (const std::optional<Row> head = store.WaitsFor(row.id)) {
    std::string what = "id " + std::to_string(head->id) + " (" +
                       std::string(outbox::store::StatusName(head->status));
    if (head->status == Status::kDead) {
      what += ", " + head->dead_reason.value_or("dead") +
              "; `outboxctl retry --id " + std::to_string(head->id) + "` or purge it to go on";
    } else if (head->status == Status::kPending) {
      what += ", due " + outbox::util::FormatRfc3339(head->next_attempt_at);
    }
    return what + "), the oldest undelivered message of ordering key " +
           head->ordering_key.value_or("") + " before it";
  }
  if (row.next_attempt_at > NowMs()) {
    return "its time, " + outbox::util::FormatRfc3339(row.next_attempt_at);
  }
  return "nothing: an agent sends it at its next pass";
}

int RunShow(const Context& context, std::int64_t id) {
  Store store = Open(context);
  const std::optional<Row> row = store.Get(id);
  if (!row) {
    std::cerr << "outboxctl: no row with id " << id << '\n';
    return kExitFailure;
  }
  if (context.json) {
    outbox::row_json::RowJsonOptions options;
    options.with_payload = true;
    std::cout << outbox::row_json::RowToJson(*row, options) << '\n';
    return 0;
  }
  std::cout << "id:               " << row->id << '\n'
            << "topic:            " << row->topic << '\n'
            << "msg_key:          " << row->key << '\n'
            << "ordering_key:     " << row->ordering_key.value_or("-") << '\n'
            << "status:           " << outbox::store::StatusName(row->status) << '\n'
            << "waits for:        " << WaitsFor(store, *row) << '\n'
            << "attempts:         " << row->attempts << '\n'
            << "next_attempt_at:  " << outbox::util::FormatRfc3339(row->next_attempt_at) << '\n'
            << "created_at:       " << outbox::util::FormatRfc3339(row->created_at) << '\n'
            << "updated_at:       " << outbox::util::FormatRfc3339(row->updated_at) << '\n'
            << "lease_owner:      " << row->lease_owner.value_or("-") << '\n'
            << "crashes:          " << row->crashes << '\n'
            << "operator_retries: " << row->operator_retries << '\n'
            << "headers:          " << row->headers_json.value_or("-") << '\n'
            << "last_error:       " << OneLine(row->last_error.value_or("-"), 2000) << '\n'
            << "payload (" << row->payload.size() << " bytes): " << OneLine(row->payload, 2000)
            << '\n';
  return 0;
}

int RunOrdering(const Context& context, const std::string& forget) {
  Store store = Open(context);
  if (!forget.empty()) {
    if (!store.ForgetOrdering(forget)) {
      std::cerr << "outboxctl: no ordering recorded for topic " << forget << '\n';
      return kExitFailure;
    }
    std::cout << "forgot the ordering of topic " << forget
              << "; the next agent to start records its own\n";
    return 0;
  }
  std::printf("%-32s %s\n", "TOPIC", "ORDERING");
  for (const auto& [topic, mode] : store.RecordedOrderings()) {
    std::printf("%-32s %s\n", OneLine(topic, 32).c_str(), outbox::store::Describe(mode).c_str());
  }
  return 0;
}

std::string ReadPayload(const std::string& source) {
  if (source.empty()) return {};
  if (source == "-") {
    return {std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  }
  std::ifstream in(source, std::ios::binary);
  if (!in) throw std::invalid_argument("--payload-file: cannot read '" + source + "'");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int RunEnqueue(const Context& context, const outbox::store::NewMessage& base,
               const std::string& payload_source, bool idempotent) {
  outbox::store::NewMessage message = base;
  outbox::store::ValidateMessage(message);  // before reading a large payload
  message.payload = ReadPayload(payload_source);
  Store store = Open(context);
  outbox::store::Producer producer(store.connection());
  outbox::store::EnqueueOptions options;
  options.standalone = true;
  options.idempotent = idempotent;
  const outbox::store::EnqueueResult result = producer.Enqueue(message, options);
  std::cout << (result.inserted ? "enqueued id " : "already enqueued as id ") << result.id
            << '\n';
  return 0;
}

outbox::store::DeadSelector Selector(const std::optional<std::int64_t>& id,
                                     const std::string& topic, bool all) {
  outbox::store::DeadSelector selector;
  selector.id = id;
  if (!topic.empty()) selector.topic = topic;
  selector.all = all;
  return selector;
}

std::string Actor() {
  const char* user = std::getenv("SUDO_USER");
  if (user == nullptr) user = std::getenv("USER");
  return std::string("outboxctl:") + (user != nullptr ? user : std::to_string(::getuid()));
}

int RunRetry(const Context& context, const outbox::store::DeadSelector& selector) {
  Store store = Open(context);
  const int count = store.RetryDead(selector, Actor(), NowMs());
  std::cout << "reset " << count << " dead row" << (count == 1 ? "" : "s") << " to pending\n";
  return 0;
}

// Deletes in small batches, each its own short write transaction, so that a
// live outboxd keeps delivering in between; prints how many went.
int PurgeInBatches(const std::function<int()>& one_batch, const char* what) {
  long long total = 0;
  for (int n = kPurgeBatch; n == kPurgeBatch;) {
    n = one_batch();
    total += n;
  }
  std::cout << "purged " << total << ' ' << what << " row" << (total == 1 ? "" : "s") << '\n';
  return 0;
}

int RunPurgeDelivered(const Context& context, std::int64_t older_than_ms) {
  if (older_than_ms < 0) throw std::invalid_argument("--older-than-ms: expected 0 or more");
  Store store = Open(context);
  const std::int64_t cutoff = NowMs() - older_than_ms + (older_than_ms == 0 ? 1 : 0);
  return PurgeInBatches([&] { return store.PurgeDelivered(cutoff, kPurgeBatch); }, "delivered");
}

int RunPurgeDead(const Context& context, const outbox::store::DeadSelector& selector) {
  Store store = Open(context);
  return PurgeInBatches([&] { return store.PurgeDead(selector, kPurgeBatch); }, "dead");
}

// Every flag and option of the command line, filled by CLI11.
struct CommandLine {
  Context context;
  std::string status_name;
  std::string topic;
  int limit = 100;
  std::int64_t show_id = 0;
  std::optional<std::int64_t> select_id;
  std::string select_topic;
  bool select_all_dead = false;
  std::int64_t older_than_ms = 0;
  bool purge_dead = false;
  bool purge_all = false;
  outbox::store::NewMessage message;
  std::string payload_source;
  bool if_absent = false;
  bool blocked = false;
  std::string forget_ordering;
};

void DeclareQueries(CLI::App& app, CommandLine& cl) {
  app.add_subcommand("init", "create or migrate the outbox schema (idempotent)");

  auto* stats = app.add_subcommand("stats", "counts per topic and status");
  stats->add_flag("--json", cl.context.json, "machine-readable output");

  auto* list = app.add_subcommand("list", "list rows");
  list->add_option("--status", cl.status_name, "pending, in_flight, delivered or dead");
  list->add_option("--topic", cl.topic, "only this topic");
  list->add_option("--limit", cl.limit, "at most this many rows")->check(CLI::PositiveNumber);
  list->add_flag("--blocked", cl.blocked,
                 "only the heads of blocked ordering keys (dead, or waiting for a retry or its "
                 "deliver_at, while later messages of the key wait)");
  list->add_flag("--json", cl.context.json, "machine-readable output");

  auto* ordering = app.add_subcommand("ordering", "the per-key ordering recorded for each topic");
  ordering->add_option("--forget", cl.forget_ordering,
                       "forget TOPIC's recorded ordering (stop every agent first)");

  auto* show = app.add_subcommand("show", "show one row with its headers and last error");
  show->add_option("ID", cl.show_id, "row id")->required();
  show->add_flag("--json", cl.context.json, "machine-readable output");
}

void DeclareRepairs(CLI::App& app, CommandLine& cl) {
  auto* retry = app.add_subcommand("retry", "reset dead rows to pending with a fresh budget");
  auto* retry_id = retry->add_option("--id", cl.select_id, "one row");
  auto* retry_topic = retry->add_option("--topic", cl.select_topic, "every dead row of a topic");
  auto* retry_all = retry->add_flag("--all-dead", cl.select_all_dead, "every dead row");
  retry_id->excludes(retry_topic, retry_all);
  retry_topic->excludes(retry_all);
  retry->require_option(1);

  auto* purge = app.add_subcommand(
      "purge", "delete delivered rows (default) or, with --dead, selected dead rows");
  auto* older = purge->add_option("--older-than-ms", cl.older_than_ms,
                                  "delivered more than MS ago (0: every delivered row)");
  auto* dead_flag = purge->add_flag("--dead", cl.purge_dead, "purge dead rows instead");
  auto* purge_id = purge->add_option("--id", cl.select_id, "with --dead: one row");
  auto* purge_topic = purge->add_option("--topic", cl.select_topic, "with --dead: a topic");
  auto* purge_all_flag = purge->add_flag("--all", cl.purge_all, "with --dead: every dead row");
  older->excludes(dead_flag);
  purge_id->needs(dead_flag)->excludes(purge_topic, purge_all_flag);
  purge_topic->needs(dead_flag)->excludes(purge_all_flag);
  purge_all_flag->needs(dead_flag);

  auto* enqueue = app.add_subcommand("enqueue", "add one message (its own transaction)");
  enqueue->add_option("--topic", cl.message.topic, "topic")->required();
  enqueue->add_option("--key", cl.message.key, "msg_key, unique per topic")->required();
  enqueue->add_option("--payload-file", cl.payload_source, "file with the body, or - for stdin");
  enqueue->add_option("--headers", cl.message.headers_json, "JSON object of extra HTTP headers");
  enqueue->add_option("--ordering-key", cl.message.ordering_key,
                      "messages of one ordering key go in commit order (topics with ordering)");
  enqueue->add_flag("--if-absent", cl.if_absent,
                    "succeed with the existing id on a duplicate key");
}

// Runs the one subcommand given; throws on bad input or a broken database.
int Dispatch(const CLI::App& app, const CommandLine& cl) {
  const Context& context = cl.context;
  if (app.got_subcommand("init")) return RunInit(context);
  if (app.got_subcommand("stats")) return RunStats(context);
  if (app.got_subcommand("list")) {
    return RunList(context, cl.status_name, cl.topic, cl.limit, cl.blocked);
  }
  if (app.got_subcommand("ordering")) return RunOrdering(context, cl.forget_ordering);
  if (app.got_subcommand("show")) return RunShow(context, cl.show_id);
  if (app.got_subcommand("retry")) {
    return RunRetry(context, Selector(cl.select_id, cl.select_topic, cl.select_all_dead));
  }
  if (app.got_subcommand("purge")) {
    if (!cl.purge_dead) return RunPurgeDelivered(context, cl.older_than_ms);
    if (!cl.select_id && cl.select_topic.empty() && !cl.purge_all) {
      throw std::invalid_argument("purge --dead: choose one of --id, --topic or --all");
    }
    return RunPurgeDead(context, Selector(cl.select_id, cl.select_topic, cl.purge_all));
  }
  if (app.got_subcommand("enqueue")) {
    return RunEnqueue(context, cl.message, cl.payload_source, cl.if_absent);
  }
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Inspect and repair an edge-outbox database", "outboxctl"};
  app.set_version_flag("--version", "outboxctl 0.1.0");
  CommandLine cl;
  app.add_option("--db", cl.context.db_path, "the application's SQLite file")->required();
  app.require_subcommand(1);
  DeclareQueries(app, cl);
  DeclareRepairs(app, cl);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "outboxctl: " << e.what() << '\n';
    return kExitUsage;
  }

  try {
    return Dispatch(app, cl);
  } catch (const std::invalid_argument& e) {
    std::cerr << "outboxctl: " << e.what() << '\n';
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "outboxctl: " << e.what() << '\n';
    return kExitFailure;
  }
}
