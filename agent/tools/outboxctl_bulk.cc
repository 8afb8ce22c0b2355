// outboxctl bulk: retry, cancel or mark-delivered every row a filter
// selects, after a dry run, through the same store code as the admin API
// (store::Operator::CountForAction / ApplyToMatching). One audit row per
// changed message.
#include <iostream>
#include <memory>

#include "outboxctl_common.h"
#include "util/clock.h"

namespace outbox::ctl {
namespace {

std::optional<std::string> Given(const std::string& text) {
  return text.empty() ? std::nullopt : std::optional(text);
}

std::optional<std::int64_t> TimeGiven(const char* flag, const std::string& text,
                                      std::int64_t now) {
  return text.empty() ? std::nullopt : std::optional(TimeFlag(flag, text, now));
}

struct BulkArgs {
  std::string action;
  QueryArgs query;
  bool dry_run = false;
  std::optional<std::int64_t> expect;
  std::int64_t tolerance = 0;
};

int RunBulk(const Context& context, const BulkArgs& args) {
  const std::optional<store::BulkAction> action = store::ParseBulkAction(args.action);
  if (!action) {
    throw std::invalid_argument("ACTION: expected retry, cancel or mark-delivered, not '" +
                                args.action + "'");
  }
  if (args.dry_run == args.expect.has_value()) {
    throw std::invalid_argument("bulk: give --dry-run first, then --expect N with its count");
  }
  const store::MessageQuery query = args.query.ToQuery(util::NowMs());
  store::Store store = Open(context);
  store::Operator op(store);
  if (args.dry_run) {
    const store::BulkCount count = op.CountForAction(*action, query);
    std::cout << args.action << " would change " << Rows(count.matched) << " (" << query.Describe()
              << ")";
    if (count.in_flight > 0) std::cout << "; " << count.in_flight << " in flight left alone";
    std::cout << "\nconfirm with: --expect " << count.matched << '\n';
    return kExitOk;
  }
  const store::BulkResult result = op.ApplyToMatching(
      *action, query, {*args.expect, args.tolerance}, CurrentActor(), util::NowMs());
  if (!result.applied) {
    std::cerr << "outboxctl: the filter now selects " << Rows(result.count.matched) << ", not "
              << *args.expect << " (tolerance " << args.tolerance
              << "); nothing changed: run --dry-run again\n";
    return kExitFailure;
  }
  std::cout << args.action << ": changed " << Rows(result.changed) << '\n';
  return kExitOk;
}

}  // namespace

bool QueryArgs::Any() const {
  for (const std::string* field : {&key_prefix, &created_from, &created_until, &updated_from,
                                   &updated_until, &dead_reason, &error}) {
    if (!field->empty()) return true;
  }
  return false;
}

store::MessageQuery QueryArgs::ToQuery(std::int64_t now_ms) const {
  store::MessageQuery query;
  if (!status.empty()) {
    query.status = store::ParseStatus(status);
    if (!query.status) {
      throw std::invalid_argument("--status: expected pending, in_flight, delivered or dead");
    }
  }
  query.topic = Given(topic);
  query.key = Given(key);
  query.key_prefix = Given(key_prefix);
  query.dead_reason = Given(dead_reason);
  query.error_text = Given(error);
  query.created_from = TimeGiven("--created-from", created_from, now_ms);
  query.created_until = TimeGiven("--created-until", created_until, now_ms);
  query.updated_from = TimeGiven("--updated-from", updated_from, now_ms);
  query.updated_until = TimeGiven("--updated-until", updated_until, now_ms);
  query.Validate();
  return query;
}

void DeclareQueryFlags(CLI::App& command, QueryArgs& args, bool with_basics) {
  if (with_basics) {
    command.add_option("--status", args.status, "pending, in_flight, delivered or dead");
    command.add_option("--topic", args.topic, "only this topic");
    command.add_option("--key", args.key, "only this msg_key");
  }
  command.add_option("--key-prefix", args.key_prefix, "msg_key starts with this");
  command.add_option("--created-from", args.created_from, "created at or after T");
  command.add_option("--created-until", args.created_until, "created before T");
  command.add_option("--updated-from", args.updated_from, "updated at or after T");
  command.add_option("--updated-until", args.updated_until, "updated before T");
  command.add_option("--dead-reason", args.dead_reason, "dead rows with this dead_reason");
  command.add_option("--error", args.error, "last_error contains this text (any case)");
}

void DeclareBulkCommand(CLI::App& app, const Context& context, Commands& commands) {
  auto args = std::make_shared<BulkArgs>();
  auto* bulk = app.add_subcommand(
      "bulk", "retry, cancel or mark-delivered every row a filter selects, after a dry run");
  bulk->add_option("ACTION", args->action, "retry, cancel or mark-delivered")->required();
  DeclareQueryFlags(*bulk, args->query, /*with_basics=*/true);
  bulk->add_flag("--dry-run", args->dry_run, "count what the action would change");
  bulk->add_option("--expect", args->expect, "the dry run's count: act only if it still holds");
  bulk->add_option("--tolerance", args->tolerance, "how far the count may have moved (default 0)")
      ->check(CLI::NonNegativeNumber);
  commands.push_back({bulk, [&context, args] { return RunBulk(context, *args); }});
}

}  // namespace outbox::ctl
