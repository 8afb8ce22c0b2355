// `outboxctl reconcile`: compares this outbox with the receiver's record of
// the Idempotency-Keys it applied, for a window of the messages' created_at,
// and optionally repairs the differences (both repairs audited).
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <unordered_set>

#include "outboxctl_common.h"
#include "row_json.h"
#include "util/clock.h"
#include "util/message_id.h"
#include "util/rfc3339.h"

namespace outbox::ctl {
namespace {

using util::NowMs;

// What the agents publish in outbox_runtime, and the fallbacks when no agent
// has run yet: the default lease and the default delivered-row retention.
constexpr std::int64_t kDefaultSettleMs = 180'000;
constexpr std::int64_t kDefaultRetentionMs = 604'800'000;
constexpr int kPage = 2000;

struct ReconcileArgs {
  std::string receiver_keys;
  std::string since;
  std::string until;
  std::optional<std::int64_t> settle_ms;
  bool requeue_missing = false;
  bool mark_applied = false;
  bool json = false;
};

std::unordered_set<std::string> ReadKeys(const std::string& source) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (source != "-") {
    file.open(source, std::ios::binary);
    if (!file) throw std::invalid_argument("--receiver-keys: cannot read '" + source + "'");
    in = &file;
  }
  std::unordered_set<std::string> keys;
  Progress progress("reading receiver keys");
  for (std::string line; std::getline(*in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    keys.insert(std::move(line));
    progress.Update(static_cast<std::int64_t>(keys.size()));
  }
  return keys;
}

std::optional<std::int64_t> PublishedMs(store::Operator& operator_actions, std::string_view name) {
  const std::optional<std::string> text = operator_actions.RuntimeValue(name);
  if (!text) return std::nullopt;
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (error != std::errc() || end != text->data() + text->size() || value < 0) return std::nullopt;
  return value;
}

struct Findings {
  std::vector<std::int64_t> missing_at_receiver;      // delivered here, absent there
  std::vector<std::int64_t> applied_not_delivered;  // applied there, pending/dead here
  std::int64_t agreeing = 0;
  std::int64_t unsettled = 0;
  std::int64_t foreign_keys = 0;  // receiver keys no row of this database produces
  std::int64_t rows_in_window = 0;
};

Findings Compare(store::Store& store, store::Operator& operator_actions,
                 std::unordered_set<std::string> keys, std::int64_t since, std::int64_t until,
                 std::int64_t settled_before, std::int64_t total_rows) {
  Findings findings;
  const std::string& database_id = store.database_id();
  Progress progress("comparing");
  std::int64_t seen = 0;
  for (std::int64_t after = 0;;) {
    const std::vector<store::Operator::RowState> page = operator_actions.States(after, kPage);
    if (page.empty()) break;
    after = page.back().id;
    for (const store::Operator::RowState& row : page) {
      // Erased when found: what is left at the end matches no row here.
      const bool at_receiver = keys.erase(util::MessageId(database_id, row.topic, row.key)) == 1;
      if (row.created_at < since || row.created_at >= until) continue;
      ++findings.rows_in_window;
      if (row.status == store::Status::kInFlight || row.updated_at >= settled_before) {
        ++findings.unsettled;
      } else if (row.status == store::Status::kDelivered && !at_receiver) {
        findings.missing_at_receiver.push_back(row.id);
      } else if (row.status != store::Status::kDelivered && at_receiver) {
        findings.applied_not_delivered.push_back(row.id);
      } else {
        ++findings.agreeing;
      }
    }
    seen += static_cast<std::int64_t>(page.size());
    progress.Update(seen, total_rows);
  }
  findings.foreign_keys = static_cast<std::int64_t>(keys.size());
  return findings;
}

std::string IdList(const std::vector<std::int64_t>& ids) {
  std::string out;
  for (std::size_t i = 0; i < ids.size() && i < 50; ++i) out += (i ? " " : "") + std::to_string(ids[i]);
  if (ids.size() > 50) out += " …";
  return out;
}

int RunReconcile(const Context& context, const ReconcileArgs& args) {
  const std::int64_t now = NowMs();
  std::optional<std::int64_t> since_arg;
  if (!args.since.empty()) since_arg = TimeFlag("--since", args.since, now);
  const std::int64_t until =
      args.until.empty() ? now : TimeFlag("--until", args.until, now);
  if (args.settle_ms && *args.settle_ms < 0) {
    throw std::invalid_argument("--settle-ms: expected 0 or more");
  }
  std::unordered_set<std::string> keys = ReadKeys(args.receiver_keys);

  store::Store store = Open(context);
  store::Operator operator_actions(store);
  const std::int64_t retention =
      PublishedMs(operator_actions, "retention.delivered_ms").value_or(kDefaultRetentionMs);
  const std::int64_t settle_ms =
      args.settle_ms.value_or(PublishedMs(operator_actions, "lease_timeout_ms").value_or(kDefaultSettleMs));
  // Delivered rows older than the retention are gone here: comparing them
  // would report every one as applied at the receiver only.
  const std::int64_t oldest_kept = retention > 0 ? now - retention : INT64_MIN;
  if (since_arg && *since_arg < oldest_kept) {
    throw std::invalid_argument("--since: " + util::FormatRfc3339(*since_arg) +
                                " is before the delivered-row retention (" +
                                util::FormatRfc3339(oldest_kept) +
                                "); rows older than that are purged here");
  }
  const std::int64_t since = since_arg.value_or(retention > 0 ? oldest_kept : 0);
  if (until <= since) throw std::invalid_argument("--until: must be after --since");

  std::int64_t total_rows = 0;
  for (const auto& count : store.GetStats().counts) total_rows += count.count;
  Findings findings = Compare(store, operator_actions, std::move(keys), since, until,
                              now - settle_ms, total_rows);

  const store::Actor actor = CurrentActor();
  int requeued = 0;
  int marked = 0;
  if (args.requeue_missing && !findings.missing_at_receiver.empty()) {
    requeued = operator_actions.Requeue(findings.missing_at_receiver, actor,
                                        "reconcile-requeue-missing", NowMs());
  }
  if (args.mark_applied && !findings.applied_not_delivered.empty()) {
    marked = operator_actions.MarkDeliveredIds(findings.applied_not_delivered, actor,
                                               "reconcile-mark-applied", NowMs());
  }
  const bool differ =
      !findings.missing_at_receiver.empty() || !findings.applied_not_delivered.empty();

  if (args.json) {
    std::cout << "{\"since\":\"" << util::FormatRfc3339(since) << "\",\"until\":\""
              << util::FormatRfc3339(until) << "\",\"settle_ms\":" << settle_ms
              << ",\"rows_in_window\":" << findings.rows_in_window
              << ",\"agreeing\":" << findings.agreeing << ",\"unsettled\":" << findings.unsettled
              << ",\"missing_at_receiver\":" << row_json::IdsToJson(findings.missing_at_receiver)
              << ",\"applied_not_delivered\":"
              << row_json::IdsToJson(findings.applied_not_delivered)
              << ",\"foreign_keys\":" << findings.foreign_keys << ",\"requeued\":" << requeued
              << ",\"marked_delivered\":" << marked << ",\"differ\":" << (differ ? "true" : "false")
              << "}\n";
  } else {
    std::printf("window %s .. %s (created_at), settle %lld ms: %lld rows\n",
                util::FormatRfc3339(since).c_str(), util::FormatRfc3339(until).c_str(),
                static_cast<long long>(settle_ms), static_cast<long long>(findings.rows_in_window));
    std::printf("agreeing                        %lld\n", static_cast<long long>(findings.agreeing));
    std::printf("unsettled (in flight or recent) %lld\n", static_cast<long long>(findings.unsettled));
    std::printf("delivered here, missing there   %zu  %s\n", findings.missing_at_receiver.size(),
                IdList(findings.missing_at_receiver).c_str());
    std::printf("applied there, not delivered    %zu  %s\n", findings.applied_not_delivered.size(),
                IdList(findings.applied_not_delivered).c_str());
    std::printf("receiver keys from elsewhere    %lld  (other senders; not a difference)\n",
                static_cast<long long>(findings.foreign_keys));
    if (args.requeue_missing) std::printf("requeued %d row(s) for delivery\n", requeued);
    if (args.mark_applied) std::printf("marked %d row(s) delivered\n", marked);
  }
  return differ ? kExitDifferences : kExitOk;
}

}  // namespace

void DeclareReconcileCommands(CLI::App& app, const Context& context, Commands& commands) {
  auto args = std::make_shared<ReconcileArgs>();
  auto* reconcile = app.add_subcommand(
      "reconcile",
      "compare with the receiver's applied Idempotency-Keys (exit 3 when they differ)");
  reconcile->add_option("--receiver-keys", args->receiver_keys,
                        "file with one Idempotency-Key per line, or - for stdin")
      ->required();
  reconcile->add_option("--since", args->since,
                        "messages created from: RFC 3339, ms since the epoch or -2h "
                        "(default: the delivered-row retention)");
  reconcile->add_option("--until", args->until, "messages created before (default: now)");
  reconcile->add_option("--settle-ms", args->settle_ms,
                        "leave out rows changed this recently (default: the agents' lease)");
  reconcile->add_flag("--requeue-missing", args->requeue_missing,
                      "send again what the receiver lacks (fresh budget)");
  reconcile->add_flag("--mark-applied", args->mark_applied,
                      "mark delivered what the receiver applied");
  reconcile->add_flag("--json", args->json, "machine-readable output");
  commands.push_back({reconcile, [&context, args] { return RunReconcile(context, *args); }});
}

}  // namespace outbox::ctl
