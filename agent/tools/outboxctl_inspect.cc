// outboxctl's read-only commands (and init): stats, list, show, audit.
#include <cstdio>
#include <iostream>
#include <memory>

#include "outboxctl_common.h"
#include "row_json.h"
#include "util/clock.h"
#include "util/rfc3339.h"

namespace outbox::ctl {
namespace {

using store::Row;
using util::NowMs;

// --limit's upper bound: CLI::PositiveNumber's own range message printed
// DBL_MAX, 309 digits.
constexpr int kMaxListLimit = 1'000'000;

int RunInit(const Context& context) {
  store::Store store = Open(context, OpenMode::kCreate);
  std::cout << "initialised " << context.db_path << " (outbox schema " << store::kSchemaVersion
            << ", database id " << store.database_id() << ")\n";
  return kExitOk;
}

int RunStats(const Context& context, bool json) {
  store::Store store = Open(context, OpenMode::kReadOnly);
  const store::Stats stats = store.GetStats();
  const std::int64_t now = NowMs();
  if (json) {
    std::cout << row_json::StatsToJson(stats, store.database_id(), now) << '\n';
    return kExitOk;
  }
  std::printf("database id %s (outbox schema %d)\n\n", store.database_id().c_str(),
              store::kSchemaVersion);
  std::printf("%-32s %-10s %10s %16s\n", "TOPIC", "STATUS", "COUNT", "OLDEST AGE (s)");
  for (const auto& count : stats.counts) {
    std::printf("%-32s %-10s %10lld %16.1f\n", OneLine(count.topic, 32).c_str(),
                std::string(store::StatusName(count.status)).c_str(),
                static_cast<long long>(count.count), AgeSeconds(now, count.oldest_created_at));
  }
  std::printf("\nundelivered %lld  database %lld bytes  wal %lld bytes\n",
              static_cast<long long>(stats.undelivered), static_cast<long long>(stats.db_bytes),
              static_cast<long long>(stats.wal_bytes));
  // The limits stored in the file (outbox_limits), which the insert trigger
  // enforces for every writer; 0 is "no limit".
  std::printf("limits: max_pending %lld, max_db_bytes %lld, max_payload_bytes %lld\n",
              static_cast<long long>(stats.limits.max_pending),
              static_cast<long long>(stats.limits.max_db_bytes),
              static_cast<long long>(stats.limits.max_payload_bytes));
  return kExitOk;
}

struct ListArgs {
  std::string status;
  std::string topic;
  std::string key;
  int limit = 100;
  bool blocked = false;
  bool json = false;
};

// The head of each blocked ordering key (docs/ordering.md): the message its
// key waits for.
std::vector<Row> BlockedHeads(store::Store& store, const std::string& topic, int limit) {
  std::vector<Row> heads;
  std::int64_t after = 0;
  const std::int64_t now = util::NowMs();
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

std::vector<Row> ListRows(store::Store& store, const ListArgs& args) {
  std::optional<store::Status> status;
  if (!args.status.empty()) {
    status = store::ParseStatus(args.status);
    if (!status) {
      throw std::invalid_argument("--status: expected pending, in_flight, delivered or dead, not '" +
                                  args.status + "'");
    }
  }
  if (args.blocked) {
    if (status || !args.key.empty()) {
      throw std::invalid_argument("--blocked: lists the heads of blocked keys; drop --status/--key");
    }
    return BlockedHeads(store, args.topic, args.limit);
  }
  if (args.key.empty()) {
    store::ListFilter filter;
    filter.status = status;
    if (!args.topic.empty()) filter.topic = args.topic;
    filter.limit = args.limit;
    return store.List(filter);
  }
  store::RowSelector selector;
  selector.topic = args.topic;
  selector.key = args.key;
  selector.status = status;
  std::vector<Row> rows;
  for (std::int64_t id : store::Operator(store).SelectIds(selector, args.limit)) {
    if (std::optional<Row> row = store.Get(id)) rows.push_back(*std::move(row));
  }
  return rows;
}

int RunList(const Context& context, const ListArgs& args) {
  store::Store store = Open(context, OpenMode::kReadOnly);
  const std::vector<Row> rows = ListRows(store, args);
  if (args.json) {
    std::cout << row_json::RowsToJson(rows) << '\n';
    return kExitOk;
  }
  std::printf("%-8s %-24s %-24s %-10s %8s  %-24s %s\n", "ID", "TOPIC", "KEY", "STATUS",
              "ATTEMPTS", "NEXT ATTEMPT", "LAST ERROR");
  for (const Row& row : rows) {
    std::printf("%-8lld %-24s %-24s %-10s %8d  %-24s %s\n", static_cast<long long>(row.id),
                OneLine(row.topic, 24).c_str(), OneLine(row.key, 24).c_str(),
                std::string(store::StatusName(row.status)).c_str(), row.attempts,
                util::FormatRfc3339(row.next_attempt_at).c_str(),
                OneLine(row.last_error.value_or(""), 60).c_str());
  }
  return kExitOk;
}

struct ShowArgs {
  std::optional<std::int64_t> id;
  std::string topic;
  std::string key;
  bool json = false;
};

// What keeps a pending row from being sent, in words.
std::string WaitsFor(store::Store& store, const Row& row) {
  if (row.status != store::Status::kPending) return "-";
  if (const std::optional<Row> head = store.WaitsFor(row.id)) {
    std::string what = "id " + std::to_string(head->id) + " (" +
                       std::string(store::StatusName(head->status));
    if (head->status == store::Status::kDead) {
      what += ", " + head->dead_reason.value_or("dead") + "; `outboxctl retry --id " +
              std::to_string(head->id) + "` or purge it to go on";
    } else if (head->status == store::Status::kPending) {
      what += ", due " + util::FormatRfc3339(head->next_attempt_at);
    }
    return what + "), the oldest undelivered message of ordering key " +
           head->ordering_key.value_or("") + " before it";
  }
  if (row.next_attempt_at > util::NowMs()) {
    return "its time, " + util::FormatRfc3339(row.next_attempt_at);
  }
  return "nothing: an agent sends it at its next pass";
}

int RunOrdering(const Context& context, const std::string& forget) {
  store::Store store = Open(context, forget.empty() ? OpenMode::kReadOnly : OpenMode::kReadWrite);
  if (!forget.empty()) {
    if (!store.ForgetOrdering(forget)) {
      std::cerr << "outboxctl: no ordering recorded for topic " << forget << '\n';
      return kExitFailure;
    }
    std::cout << "forgot the ordering of topic " << forget
              << "; the next agent to start records its own\n";
    return kExitOk;
  }
  std::printf("%-32s %s\n", "TOPIC", "ORDERING");
  for (const auto& [topic, mode] : store.RecordedOrderings()) {
    std::printf("%-32s %s\n", OneLine(topic, 32).c_str(), store::Describe(mode).c_str());
  }
  return kExitOk;
}

int RunShow(const Context& context, const ShowArgs& args) {
  store::Store store = Open(context, OpenMode::kReadOnly);
  std::optional<std::int64_t> id = args.id;
  if (!id) {
    if (args.topic.empty() || args.key.empty()) {
      throw std::invalid_argument("show: give an ID, or --topic and --key");
    }
    store::RowSelector selector;
    selector.topic = args.topic;
    selector.key = args.key;
    const std::vector<std::int64_t> ids = store::Operator(store).SelectIds(selector, 1);
    if (ids.empty()) {
      std::cerr << "outboxctl: no row with topic '" << args.topic << "' and key '" << args.key
                << "'\n";
      return kExitFailure;
    }
    id = ids.front();
  }
  const std::optional<Row> row = store.Get(*id);
  if (!row) {
    std::cerr << "outboxctl: no row with id " << *id << '\n';
    return kExitFailure;
  }
  if (args.json) {
    row_json::RowJsonOptions options;
    options.with_payload = true;
    std::cout << row_json::RowToJson(*row, options) << '\n';
    return kExitOk;
  }
  const auto time_or_dash = [](const std::optional<std::int64_t>& ms) {
    return ms ? util::FormatRfc3339(*ms) : std::string("-");
  };
  // Acknowledged by the receiver, its completion hook still to succeed: to
  // plain SQL it is pending, but it is never sent again.
  const std::string status = row->acked_at && row->status == store::Status::kPending
                                 ? "acknowledged, completion pending"
                                 : std::string(store::StatusName(row->status));
  std::cout << "id:               " << row->id << '\n'
            << "topic:            " << row->topic << '\n'
            << "msg_key:          " << row->key << '\n'
            << "ordering_key:     " << row->ordering_key.value_or("-") << '\n'
            << "status:           " << status << '\n'
            << "waits for:        " << WaitsFor(store, *row) << '\n'
            << "dead_reason:      " << row->dead_reason.value_or("-") << '\n'
            << "schema_version:   " << row->schema_version.value_or("-") << '\n'
            << "deliver_at:       " << time_or_dash(row->deliver_at) << '\n'
            << "expires_at:       " << time_or_dash(row->expires_at) << '\n'
            << "acked_at:         " << time_or_dash(row->acked_at) << '\n'
            << "attempts:         " << row->attempts << '\n'
            << "next_attempt_at:  " << util::FormatRfc3339(row->next_attempt_at)
            << (row->status == store::Status::kPending && row->next_attempt_at == store::kParkedAt
                    ? " (parked behind a dead head: due again once its key can go on)"
                    : "")
            << '\n'
            << "created_at:       " << util::FormatRfc3339(row->created_at) << '\n'
            << "updated_at:       " << util::FormatRfc3339(row->updated_at) << '\n'
            << "lease_owner:      " << row->lease_owner.value_or("-") << '\n'
            << "crashes:          " << row->crashes << '\n'
            << "operator_retries: " << row->operator_retries << '\n'
            << "headers:          " << row->headers_json.value_or("-") << '\n'
            << "last_error:       " << OneLine(row->last_error.value_or("-"), 2000) << '\n'
            << "payload (" << row->payload.size() << " bytes): " << OneLine(row->payload, 2000)
            << '\n';
  return kExitOk;
}

struct AuditArgs {
  std::string since;
  int limit = 1000;
  bool json = false;
};

int RunAudit(const Context& context, const AuditArgs& args) {
  const std::int64_t since =
      args.since.empty() ? 0 : TimeFlag("--since", args.since, NowMs());
  store::Store store = Open(context, OpenMode::kReadOnly);
  const std::vector<store::AuditEntry> entries = store::Operator(store).Audit(since, args.limit);
  if (args.json) {
    std::cout << row_json::AuditToJson(entries) << '\n';
    return kExitOk;
  }
  std::printf("%-24s %-16s %-16s %-16s %8s  %s\n", "WHEN", "USER", "HOST", "ACTION", "ROWS",
              "DETAIL");
  for (const store::AuditEntry& entry : entries) {
    std::printf("%-24s %-16s %-16s %-16s %8lld  %s\n", util::FormatRfc3339(entry.at).c_str(),
                OneLine(entry.actor, 16).c_str(), OneLine(entry.host, 16).c_str(),
                OneLine(entry.action, 16).c_str(), static_cast<long long>(entry.rows),
                OneLine(entry.detail, 200).c_str());
  }
  return kExitOk;
}

}  // namespace

void DeclareInspectCommands(CLI::App& app, const Context& context, Commands& commands) {
  commands.push_back({app.add_subcommand("init", "create or migrate the outbox schema (idempotent)"),
                      [&context] { return RunInit(context); }});

  auto stats_json = std::make_shared<bool>(false);
  auto* stats = app.add_subcommand("stats", "counts per topic and status");
  stats->add_flag("--json", *stats_json, "machine-readable output");
  commands.push_back({stats, [&context, stats_json] { return RunStats(context, *stats_json); }});

  auto list_args = std::make_shared<ListArgs>();
  auto* list = app.add_subcommand("list", "list rows");
  list->add_option("--status", list_args->status, "pending, in_flight, delivered or dead");
  auto* list_topic = list->add_option("--topic", list_args->topic, "only this topic");
  list->add_option("--key", list_args->key, "with --topic: only this msg_key")->needs(list_topic);
  list->add_option("--limit", list_args->limit, "at most this many rows (1 to 1000000)")
      ->check(CLI::Range(1, kMaxListLimit));
  list->add_flag("--blocked", list_args->blocked,
                 "only the heads of blocked ordering keys (dead, or waiting for a retry or its "
                 "deliver_at, while later messages of the key wait)");
  list->add_flag("--json", list_args->json, "machine-readable output");
  commands.push_back({list, [&context, list_args] { return RunList(context, *list_args); }});

  auto forget = std::make_shared<std::string>();
  auto* ordering = app.add_subcommand("ordering", "the per-key ordering recorded for each topic");
  ordering->add_option("--forget", *forget,
                       "forget TOPIC's recorded ordering (stop every agent first)");
  commands.push_back({ordering, [&context, forget] { return RunOrdering(context, *forget); }});

  auto show_args = std::make_shared<ShowArgs>();
  auto* show = app.add_subcommand("show", "show one row with its headers and last error");
  auto* show_id = show->add_option("ID", show_args->id, "row id");
  auto* show_topic = show->add_option("--topic", show_args->topic, "with --key: the row's topic");
  auto* show_key = show->add_option("--key", show_args->key, "with --topic: the row's msg_key");
  show_key->needs(show_topic)->excludes(show_id);
  show_topic->needs(show_key);
  show->add_flag("--json", show_args->json, "machine-readable output");
  commands.push_back({show, [&context, show_args] { return RunShow(context, *show_args); }});

  auto audit_args = std::make_shared<AuditArgs>();
  auto* audit = app.add_subcommand("audit", "list operator actions (who, what, how many, when)");
  audit->add_option("--since", audit_args->since,
                    "from this time: RFC 3339, ms since the epoch, or an offset such as -2h");
  audit->add_option("--limit", audit_args->limit, "at most this many entries (1 to 1000000)")
      ->check(CLI::Range(1, kMaxListLimit));
  audit->add_flag("--json", audit_args->json, "machine-readable output");
  commands.push_back({audit, [&context, audit_args] { return RunAudit(context, *audit_args); }});
}

}  // namespace outbox::ctl
