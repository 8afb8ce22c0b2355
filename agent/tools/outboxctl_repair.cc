// outboxctl's commands that change rows: retry, purge, enqueue, cancel and
// mark-delivered. Each writes one audit row (store::Operator).
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>

#include "outboxctl_common.h"
#include "util/clock.h"

namespace outbox::ctl {
namespace {

using util::NowMs;

constexpr int kPurgeBatch = 500;

// The selector flags the row-changing commands share.
struct SelectArgs {
  std::optional<std::int64_t> id;
  std::string topic;
  std::string key;
  std::string status;
  std::string older_than;
  bool all = false;
};

// --id | --topic T --key K | --topic T [--status S --older-than D] | --all.
// `bulk_needs_filters`: a whole-topic change needs --status and
// --older-than (cancel and mark-delivered), so that no typo touches a topic.
// (retry and purge --dead touch dead rows only: their statements say so.)
store::RowSelector ToSelector(const SelectArgs& args, std::string_view command,
                              bool bulk_needs_filters, std::string_view all_flag = "--all") {
  store::RowSelector selector;
  selector.id = args.id;
  if (!args.topic.empty()) selector.topic = args.topic;
  if (!args.key.empty()) selector.key = args.key;
  selector.all = args.all;
  if (!args.status.empty()) selector.status = ParseActionStatus(args.status, "--status");
  if (!args.older_than.empty()) {
    selector.created_before = NowMs() - DurationFlag("--older-than", args.older_than);
  }
  const int forms = (selector.id ? 1 : 0) + (selector.topic ? 1 : 0) + (selector.all ? 1 : 0);
  if (forms != 1) {
    // Name only the flags this command has: retry and purge --dead have no
    // --status (they touch dead rows only).
    const std::string topic_form = bulk_needs_filters
                                       ? "--topic (with --key, or with --status and --older-than)"
                                       : "--topic (alone, with --key or with --older-than)";
    throw std::invalid_argument(std::string(command) + ": choose one of --id, " + topic_form +
                                (all_flag.empty() ? std::string() : " or " + std::string(all_flag)));
  }
  if (bulk_needs_filters && selector.topic && !selector.key &&
      (args.status.empty() || args.older_than.empty())) {
    throw std::invalid_argument(std::string(command) +
                                ": --topic without --key needs --status and --older-than");
  }
  return selector;
}

void DeclareSelector(CLI::App& command, SelectArgs& args, bool with_status) {
  auto* id = command.add_option("--id", args.id, "one row");
  auto* topic = command.add_option("--topic", args.topic, "rows of this topic");
  auto* key = command.add_option("--key", args.key, "with --topic: the row with this msg_key");
  key->needs(topic)->excludes(id);
  id->excludes(topic);
  auto* older = command.add_option("--older-than", args.older_than,
                                   "with --topic: created more than this long ago (30m, 7d)");
  older->needs(topic)->excludes(key);
  if (with_status) {
    command.add_option("--status", args.status, "with --topic: pending or dead")
        ->needs(topic)
        ->excludes(key);
  }
}

int ReportChanged(int changed, std::string_view what) {
  std::cout << what << ' ' << Rows(changed) << '\n';
  return kExitOk;
}

int RunCancel(const Context& context, const SelectArgs& args) {
  const store::RowSelector selector = ToSelector(args, "cancel", true, "");
  store::Store store = Open(context);
  return ReportChanged(store::Operator(store).Cancel(selector, CurrentActor(), NowMs()),
                       "cancelled");
}

int RunMarkDelivered(const Context& context, const SelectArgs& args) {
  const store::RowSelector selector = ToSelector(args, "mark-delivered", true, "");
  store::Store store = Open(context);
  return ReportChanged(store::Operator(store).MarkDelivered(selector, CurrentActor(), NowMs()),
                       "marked delivered");
}

int RunRetry(const Context& context, const SelectArgs& args) {
  const store::RowSelector selector =
      ToSelector(args, "retry", false, "--all-dead");
  store::Store store = Open(context);
  const int count = store::Operator(store).Retry(selector, CurrentActor(), NowMs());
  std::cout << "reset " << count << " dead row" << (count == 1 ? "" : "s") << " to pending\n";
  return kExitOk;
}

// Deletes in small batches, each its own short write transaction, so that a
// live outboxd keeps delivering in between; then one audit row.
std::int64_t PurgeInBatches(const std::function<int()>& one_batch, const char* what) {
  Progress progress(std::string("purging ") + what + " rows");
  std::int64_t total = 0;
  for (int n = kPurgeBatch; n == kPurgeBatch;) {
    n = one_batch();
    total += n;
    progress.Update(total);
  }
  return total;
}

struct PurgeArgs {
  SelectArgs select;
  std::int64_t older_than_ms = 0;
  bool dead = false;
};

int RunPurge(const Context& context, const PurgeArgs& args) {
  store::Store store = Open(context);
  store::Operator operator_actions(store);
  if (!args.dead) {
    if (args.older_than_ms < 0) throw std::invalid_argument("--older-than-ms: expected 0 or more");
    const std::int64_t cutoff = NowMs() - args.older_than_ms + (args.older_than_ms == 0 ? 1 : 0);
    const std::int64_t total = PurgeInBatches(
        [&] { return store.PurgeDelivered(cutoff, kPurgeBatch); }, "delivered");
    operator_actions.RecordAudit(CurrentActor(), "purge-delivered", total, std::nullopt,
                                 "older_than_ms=" + std::to_string(args.older_than_ms), NowMs());
    std::cout << "purged " << total << " delivered row" << (total == 1 ? "" : "s") << '\n';
    return kExitOk;
  }
  const store::RowSelector selector = ToSelector(args.select, "purge --dead", false);
  const std::int64_t total = PurgeInBatches(
      [&] { return operator_actions.PurgeDeadBatch(selector, kPurgeBatch); }, "dead");
  operator_actions.RecordAudit(CurrentActor(), "purge-dead", total, selector.id,
                               selector.Describe(), NowMs());
  std::cout << "purged " << total << " dead row" << (total == 1 ? "" : "s") << '\n';
  return kExitOk;
}

struct EnqueueArgs {
  store::NewMessage message;
  std::string payload_source;
  bool if_absent = false;
  std::string deliver_at;  // RFC 3339, ms since the epoch or "+30m"; "" = none
  std::string expires_at;
};

std::string ReadPayload(const std::string& source) {
  if (source.empty()) return {};
  if (source == "-") {
    return {std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  }
  std::ifstream in(source, std::ios::binary);
  if (!in) throw std::invalid_argument("--payload-file: cannot read '" + source + "'");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int RunEnqueue(const Context& context, const EnqueueArgs& args) {
  store::NewMessage message = args.message;
  const std::int64_t now = util::NowMs();
  if (!args.deliver_at.empty()) message.deliver_at = TimeFlag("--deliver-at", args.deliver_at, now);
  if (!args.expires_at.empty()) message.expires_at = TimeFlag("--expires-at", args.expires_at, now);
  store::ValidateMessage(message);  // before reading a large payload
  message.payload = ReadPayload(args.payload_source);
  store::Store store = Open(context);
  store::Producer producer(store.connection());
  store::EnqueueOptions options;
  options.standalone = true;
  options.idempotent = args.if_absent;
  const store::EnqueueResult result = producer.Enqueue(message, options);
  std::cout << (result.inserted ? "enqueued id " : "already enqueued as id ") << result.id << '\n';
  return kExitOk;
}

}  // namespace

void DeclareRepairCommands(CLI::App& app, const Context& context, Commands& commands) {
  auto retry_args = std::make_shared<SelectArgs>();
  auto* retry = app.add_subcommand("retry", "reset dead rows to pending with a fresh budget");
  DeclareSelector(*retry, *retry_args, /*with_status=*/false);
  retry->add_flag("--all-dead", retry_args->all, "every dead row")
      ->excludes("--id")
      ->excludes("--topic");
  commands.push_back({retry, [&context, retry_args] { return RunRetry(context, *retry_args); }});

  auto cancel_args = std::make_shared<SelectArgs>();
  auto* cancel = app.add_subcommand(
      "cancel", "make pending or dead rows dead with reason 'cancelled' (never rows in flight)");
  DeclareSelector(*cancel, *cancel_args, /*with_status=*/true);
  commands.push_back({cancel, [&context, cancel_args] { return RunCancel(context, *cancel_args); }});

  auto mark_args = std::make_shared<SelectArgs>();
  auto* mark = app.add_subcommand(
      "mark-delivered", "mark pending or dead rows delivered without sending (never rows in flight)");
  DeclareSelector(*mark, *mark_args, /*with_status=*/true);
  commands.push_back(
      {mark, [&context, mark_args] { return RunMarkDelivered(context, *mark_args); }});

  auto purge_args = std::make_shared<PurgeArgs>();
  auto* purge = app.add_subcommand(
      "purge", "delete delivered rows (default) or, with --dead, selected dead rows");
  auto* older = purge->add_option("--older-than-ms", purge_args->older_than_ms,
                                  "delivered more than MS ago (0: every delivered row)");
  auto* dead_flag = purge->add_flag("--dead", purge_args->dead, "purge dead rows instead");
  auto* purge_id = purge->add_option("--id", purge_args->select.id, "with --dead: one row");
  auto* purge_topic = purge->add_option("--topic", purge_args->select.topic, "with --dead: a topic");
  auto* purge_key =
      purge->add_option("--key", purge_args->select.key, "with --dead --topic: one msg_key");
  auto* purge_all = purge->add_flag("--all", purge_args->select.all, "with --dead: every dead row");
  older->excludes(dead_flag);
  purge_id->needs(dead_flag)->excludes(purge_topic, purge_all);
  purge_topic->needs(dead_flag)->excludes(purge_all);
  purge_key->needs(purge_topic);
  purge_all->needs(dead_flag);
  commands.push_back({purge, [&context, purge_args] { return RunPurge(context, *purge_args); }});

  auto enqueue_args = std::make_shared<EnqueueArgs>();
  auto* enqueue = app.add_subcommand("enqueue", "add one message (its own transaction)");
  enqueue->add_option("--topic", enqueue_args->message.topic, "topic")->required();
  enqueue->add_option("--key", enqueue_args->message.key, "msg_key, unique per topic")->required();
  enqueue->add_option("--payload-file", enqueue_args->payload_source,
                      "file with the body, or - for stdin");
  enqueue->add_option("--headers", enqueue_args->message.headers_json,
                      "JSON object of extra HTTP headers");
  enqueue->add_flag("--if-absent", enqueue_args->if_absent,
                    "succeed with the existing id on a duplicate key");
  enqueue->add_option("--ordering-key", enqueue_args->message.ordering_key,
                      "messages of one ordering key go in commit order (topics with ordering)");
  enqueue->add_option("--schema-version", enqueue_args->message.schema_version,
                      "the payload's schema version (sent as Schema-Version)");
  enqueue->add_option("--deliver-at", enqueue_args->deliver_at,
                      "not before this time: RFC 3339, ms since the epoch or +30m");
  enqueue->add_option("--expires-at", enqueue_args->expires_at,
                      "dead ('expired') if not delivered by then: RFC 3339, ms or +2h");
  commands.push_back(
      {enqueue, [&context, enqueue_args] { return RunEnqueue(context, *enqueue_args); }});
}

}  // namespace outbox::ctl
