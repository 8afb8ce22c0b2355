// The operator's console: filtered message lists with keyset pagination,
// bulk actions by filter with a dry run and a confirmed count, the overview
// and the audit pages. outboxctl and the admin API both call these.
//
// A list walks ONE index in its order (sql.h, "the operator's console") and
// checks every filter field in C++ on the rows it reads. Status, topic and
// topic with a key prefix are the walk itself, so every row read matches;
// for the other fields (time ranges, dead_reason, text in last_error) no
// index exists and none is added, because an index on them would cost every
// enqueue or every completion a B-tree write; instead a request reads at most
// max_scan rows and hands back a cursor where it stopped.
#include <algorithm>
#include <cctype>
#include <limits>
#include <map>

#include "internal.h"
#include "operator_impl.h"
#include "sql.h"
#include "util/rfc3339.h"

namespace outbox::store {
namespace {

using internal::StatementUse;
using internal::Wrap;

constexpr int kMaxPageRows = 1000;
constexpr std::int64_t kMaxId = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMinValue = std::numeric_limits<std::int64_t>::min();

// Which walk serves a query, and its position (the cursor's content).
enum class Walk { kById, kByStatus, kByStatusTopic, kByKey };

struct Position {
  std::string topic;  // kByStatus
  std::string key;    // kByKey
  std::int64_t due = kMinValue;
  std::int64_t id = kMinValue;  // kById: ids below it (kMinValue: from the top)
  bool started = false;
};

char WalkTag(Walk walk) {
  switch (walk) {
    case Walk::kById:
      return 'i';
    case Walk::kByStatus:
      return 's';
    case Walk::kByStatusTopic:
      return 't';
    case Walk::kByKey:
      break;
  }
  return 'k';
}

Walk ChooseWalk(const MessageQuery& query) {
  if (query.topic && (query.key || query.key_prefix || !query.status)) return Walk::kByKey;
  if (query.status) return query.topic ? Walk::kByStatusTopic : Walk::kByStatus;
  return Walk::kById;
}

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    out += kDigits[byte >> 4];
    out += kDigits[byte & 15];
  }
  return out;
}

std::string Unhex(std::string_view hex) {
  if (hex.size() % 2 != 0) throw std::invalid_argument("cursor: not one of this list's cursors");
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw std::invalid_argument("cursor: not one of this list's cursors");
  };
  std::string out;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    out += static_cast<char>(digit(hex[i]) * 16 + digit(hex[i + 1]));
  }
  return out;
}

// "<tag>.<hex topic>.<hex key>.<due>.<id>"
std::string EncodeCursor(Walk walk, const Position& at) {
  return std::string(1, WalkTag(walk)) + '.' + Hex(at.topic) + '.' + Hex(at.key) + '.' +
         std::to_string(at.due) + '.' + std::to_string(at.id);
}

std::int64_t CursorNumber(std::string_view text) {
  std::size_t used = 0;
  const std::string copy(text);
  try {
    const long long value = std::stoll(copy, &used);
    if (used == copy.size()) return value;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("cursor: not one of this list's cursors");
}

Position DecodeCursor(Walk walk, std::string_view cursor) {
  Position at;
  if (cursor.empty()) return at;
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t dot = cursor.find('.', start);
    parts.push_back(cursor.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (parts.size() != 5 || parts[0].size() != 1) {
    throw std::invalid_argument("cursor: not one of this list's cursors");
  }
  if (parts[0][0] != WalkTag(walk)) {
    throw std::invalid_argument("cursor: belongs to a list with other filters; start again");
  }
  at.topic = Unhex(parts[1]);
  at.key = Unhex(parts[2]);
  at.due = CursorNumber(parts[3]);
  at.id = CursorNumber(parts[4]);
  at.started = true;
  return at;
}

// The first byte string after every string that starts with `prefix`, or
// nullopt when there is none (the prefix is all 0xff bytes).
std::optional<std::string> PrefixEnd(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff) prefix.pop_back();
  if (prefix.empty()) return std::nullopt;
  prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
  return prefix;
}

bool ContainsIgnoringCase(std::string_view text, std::string_view needle) {
  const auto lower = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  return std::search(text.begin(), text.end(), needle.begin(), needle.end(),
                     [&](char a, char b) { return lower(a) == lower(b); }) != text.end();
}

bool InRange(std::int64_t value, const std::optional<std::int64_t>& from,
             const std::optional<std::int64_t>& until) {
  return (!from || value >= *from) && (!until || value < *until);
}

// Every field, whatever the walk already guarantees: cheap, and right even
// if a walk changes.
bool Matches(const MessageQuery& query, const Row& row) {
  if (query.status && row.status != *query.status) return false;
  if (query.topic && row.topic != *query.topic) return false;
  if (query.key && row.key != *query.key) return false;
  if (query.key_prefix && row.key.compare(0, query.key_prefix->size(), *query.key_prefix) != 0) {
    return false;
  }
  if (!InRange(row.created_at, query.created_from, query.created_until)) return false;
  if (!InRange(row.updated_at, query.updated_from, query.updated_until)) return false;
  if (query.dead_reason &&
      (row.status != Status::kDead || row.dead_reason.value_or("") != *query.dead_reason)) {
    return false;
  }
  if (query.error_text && !ContainsIgnoringCase(row.last_error.value_or(""), *query.error_text)) {
    return false;
  }
  return true;
}

// A dead_reason names dead rows only: the walk of dead rows serves it.
MessageQuery Narrowed(MessageQuery query) {
  if (query.dead_reason && !query.status) query.status = Status::kDead;
  return query;
}

// Binds the walk's statement for rows after `at`, at most `limit` of them.
void BindWalk(SQLite::Statement& q, Walk walk, const MessageQuery& query, const Position& at,
              int limit) {
  switch (walk) {
    case Walk::kById:
      q.bind(1, at.started ? at.id : kMaxId);
      q.bind(2, limit);
      return;
    case Walk::kByStatus:
      q.bind(1, static_cast<int>(*query.status));
      q.bind(2, at.topic);
      q.bind(3, at.due);
      q.bind(4, at.id);
      q.bind(5, limit);
      return;
    case Walk::kByStatusTopic:
      q.bind(1, static_cast<int>(*query.status));
      q.bind(2, *query.topic);
      q.bind(3, at.due);
      q.bind(4, at.id);
      q.bind(5, limit);
      return;
    case Walk::kByKey:
      break;
  }
  // An exact key is the range [key, key + "\0").
  const std::string prefix = query.key ? *query.key : query.key_prefix.value_or("");
  const std::optional<std::string> end =
      query.key ? std::optional(*query.key + std::string(1, '\0')) : PrefixEnd(prefix);
  q.bind(1, *query.topic);
  q.bind(2, at.started && at.key >= prefix ? at.key : prefix);
  if (end) {
    q.bind(3, *end);
  } else {
    q.bind(3, static_cast<const void*>(""), 0);  // a blob: after every text
  }
  q.bind(4, limit);
}

const char* WalkStatement(Walk walk, const Position& at, const MessageQuery& query) {
  switch (walk) {
    case Walk::kById:
      return sql::kWalkById;
    case Walk::kByStatus:
      return sql::kWalkByStatus;
    case Walk::kByStatusTopic:
      return sql::kWalkByStatusTopic;
    case Walk::kByKey:
      break;
  }
  const std::string prefix = query.key ? *query.key : query.key_prefix.value_or("");
  return at.started && at.key >= prefix ? sql::kWalkByKeyAfter : sql::kWalkByKeyFrom;
}

Position PositionOf(const Row& row) {
  Position at;
  at.topic = row.topic;
  at.key = row.key;
  at.due = row.next_attempt_at;
  at.id = row.id;
  at.started = true;
  return at;
}

// Walks from `at` in chunks, calling `visit` with every row that matches,
// until `visit` returns false, `max_scan` rows were read or the walk ends.
// Returns the rows read; `at` ends at the last row read.
template <typename Visit>
std::int64_t WalkMatches(internal::OperatorState& state, const MessageQuery& query, Walk walk,
                         Position& at, std::int64_t max_scan, bool& ended, Visit&& visit) {
  constexpr int kChunk = 256;
  std::int64_t scanned = 0;
  ended = false;
  while (scanned < max_scan) {
    const int chunk = static_cast<int>(std::min<std::int64_t>(kChunk, max_scan - scanned));
    StatementUse q(state.Prepare(WalkStatement(walk, at, query)));
    BindWalk(*q, walk, query, at, chunk);
    int read = 0;
    while (q->executeStep()) {
      const Row row = internal::ReadRowColumns(*q);
      ++read;
      ++scanned;
      at = PositionOf(row);
      if (Matches(query, row) && !visit(row)) return scanned;
    }
    if (read < chunk) {
      ended = true;
      return scanned;
    }
  }
  return scanned;
}

bool ActionTakes(BulkAction action, Status status) {
  if (action == BulkAction::kRetry) return status == Status::kDead;
  return status == Status::kPending || status == Status::kDead;
}

// The query a bulk action walks: a retry only ever takes dead rows.
MessageQuery ForAction(BulkAction action, const MessageQuery& query) {
  MessageQuery narrowed = Narrowed(query);
  if (action == BulkAction::kRetry && !narrowed.status) narrowed.status = Status::kDead;
  return narrowed;
}

// Ids the action would change, and the count of rows in flight.
BulkCount Collect(internal::OperatorState& state, BulkAction action, const MessageQuery& query,
                  std::vector<std::int64_t>* ids) {
  query.Validate();
  const MessageQuery narrowed = ForAction(action, query);
  BulkCount count;
  Position at;
  bool ended = false;
  WalkMatches(state, narrowed, ChooseWalk(narrowed), at, kMaxId, ended, [&](const Row& row) {
    if (ActionTakes(action, row.status)) {
      ++count.matched;
      if (ids != nullptr) ids->push_back(row.id);
    } else if (row.status == Status::kInFlight) {
      ++count.in_flight;
    }
    return true;
  });
  return count;
}

const char* ByIdStatement(BulkAction action) {
  switch (action) {
    case BulkAction::kRetry:
      return sql::kRetryById;
    case BulkAction::kCancel:
      return sql::kCancelById;
    case BulkAction::kMarkDelivered:
      break;
  }
  return sql::kMarkDeliveredById;
}

AuditEntry ReadAudit(SQLite::Statement& q) {
  AuditEntry entry;
  entry.id = q.getColumn(0).getInt64();
  entry.at = q.getColumn(1).getInt64();
  entry.actor = q.getColumn(2).getString();
  entry.host = q.getColumn(3).getString();
  entry.action = q.getColumn(4).getString();
  entry.rows = q.getColumn(5).getInt64();
  if (!q.getColumn(6).isNull()) entry.row_id = q.getColumn(6).getInt64();
  entry.detail = q.getColumn(7).getString();
  return entry;
}

}  // namespace

std::string_view BulkActionName(BulkAction action) {
  switch (action) {
    case BulkAction::kRetry:
      return "retry";
    case BulkAction::kCancel:
      return "cancel";
    case BulkAction::kMarkDelivered:
      break;
  }
  return "mark-delivered";
}

std::optional<BulkAction> ParseBulkAction(std::string_view name) {
  for (BulkAction action : {BulkAction::kRetry, BulkAction::kCancel, BulkAction::kMarkDelivered}) {
    if (BulkActionName(action) == name) return action;
  }
  return std::nullopt;
}

void MessageQuery::Validate() const {
  for (const auto& [name, value] :
       {std::pair{"topic", &topic}, std::pair{"key", &key}, std::pair{"key_prefix", &key_prefix},
        std::pair{"dead_reason", &dead_reason}, std::pair{"error_text", &error_text}}) {
    if (value->has_value() && (*value)->empty()) {
      throw std::invalid_argument(std::string(name) + ": must not be empty when given");
    }
  }
  if (key && key_prefix) throw std::invalid_argument("key, key_prefix: give one of them");
  if (created_from && created_until && *created_until <= *created_from) {
    throw std::invalid_argument("created_until: must be after created_from");
  }
  if (updated_from && updated_until && *updated_until <= *updated_from) {
    throw std::invalid_argument("updated_until: must be after updated_from");
  }
  if (dead_reason) {
    static constexpr const char* kReasons[] = {
        dead_reason::kPermanent, dead_reason::kAttempts, dead_reason::kAge, dead_reason::kExpired,
        dead_reason::kCancelled, dead_reason::kCrash,    dead_reason::kHook};
    if (std::none_of(std::begin(kReasons), std::end(kReasons),
                     [&](const char* name) { return *dead_reason == name; })) {
      throw std::invalid_argument("dead_reason: expected permanent, attempts, age, expired, "
                                  "cancelled, crash or hook, not '" + *dead_reason + "'");
    }
    if (status && *status != Status::kDead) {
      throw std::invalid_argument("dead_reason: only dead rows have one; drop status or use dead");
    }
  }
}

std::string MessageQuery::Describe() const {
  std::string out;
  const auto add = [&](std::string_view name, std::string_view value) {
    if (!out.empty()) out += ' ';
    out += name;
    out += '=';
    out += value;
  };
  if (status) add("status", StatusName(*status));
  if (topic) add("topic", *topic);
  if (key) add("key", *key);
  if (key_prefix) add("key_prefix", *key_prefix);
  if (created_from) add("created_from", util::FormatRfc3339(*created_from));
  if (created_until) add("created_until", util::FormatRfc3339(*created_until));
  if (updated_from) add("updated_from", util::FormatRfc3339(*updated_from));
  if (updated_until) add("updated_until", util::FormatRfc3339(*updated_until));
  if (dead_reason) add("dead_reason", *dead_reason);
  if (error_text) add("error_text", *error_text);
  return out.empty() ? "all" : out;
}

MessagePage Operator::ListMessages(const MessageQuery& query, const PageRequest& page) {
  query.Validate();
  if (page.limit < 1 || page.limit > kMaxPageRows) {
    throw std::invalid_argument("limit: expected 1 to " + std::to_string(kMaxPageRows));
  }
  if (page.max_scan < page.limit) {
    throw std::invalid_argument("max_scan: must be at least the page's limit");
  }
  const MessageQuery narrowed = Narrowed(query);
  const Walk walk = ChooseWalk(narrowed);
  Position at = DecodeCursor(walk, page.cursor);
  return Wrap("list messages", [&] {
    MessagePage result;
    bool ended = false;
    result.scanned = WalkMatches(*impl_, narrowed, walk, at, page.max_scan, ended,
                                 [&](const Row& row) {
                                   result.rows.push_back(row);
                                   return static_cast<int>(result.rows.size()) < page.limit;
                                 });
    const bool full = static_cast<int>(result.rows.size()) == page.limit;
    result.scan_bounded = !ended && !full;
    if (!ended) result.next_cursor = EncodeCursor(walk, at);
    return result;
  });
}

BulkCount Operator::CountForAction(BulkAction action, const MessageQuery& query) {
  return Wrap("count rows", [&] { return Collect(*impl_, action, query, nullptr); });
}

BulkResult Operator::ApplyToMatching(BulkAction action, const MessageQuery& query,
                                     const BulkConfirmation& confirm, const Actor& actor,
                                     std::int64_t now) {
  if (confirm.expected < 0 || confirm.tolerance < 0) {
    throw std::invalid_argument("expected, tolerance: must be 0 or more");
  }
  const std::string detail = query.Describe();
  return Wrap(std::string(BulkActionName(action)).c_str(), [&] {
    return impl_->Atomically([&] {
      BulkResult result;
      std::vector<std::int64_t> ids;
      result.count = Collect(*impl_, action, query, &ids);
      const std::int64_t drift = result.count.matched - confirm.expected;
      if (drift > confirm.tolerance || -drift > confirm.tolerance) return result;
      result.applied = true;
      for (std::int64_t id : ids) {
        int changed = 0;
        {
          StatementUse q(impl_->Prepare(ByIdStatement(action)));
          q->bind(1, id);
          q->bind(6, now);
          changed = q->exec();
        }
        if (changed == 0) continue;
        ++result.changed;
        impl_->Audit(actor, BulkActionName(action), 1, id, detail, now);
      }
      return result;
    });
  });
}

std::vector<TopicOverview> Operator::Overview(std::int64_t now) {
  return Wrap("overview", [&] {
    std::map<std::string, TopicOverview> topics;
    {
      StatementUse q(impl_->Prepare(sql::kOverviewCounts));
      q->bind(1, now);
      while (q->executeStep()) {
        TopicOverview& t = topics[q->getColumn(0).getString()];
        t.pending = q->getColumn(1).getInt64();
        t.due = q->getColumn(2).getInt64();
        t.scheduled = t.pending - t.due;
        t.in_flight = q->getColumn(3).getInt64();
        t.dead = q->getColumn(4).getInt64();
        if (!q->getColumn(5).isNull()) t.oldest_due_age_ms = now - q->getColumn(5).getInt64();
      }
    }
    {
      StatementUse q(impl_->Prepare(sql::kOverviewDelivered));
      q->bind(1, now - 60'000);
      while (q->executeStep()) {
        topics[q->getColumn(0).getString()].delivered_last_minute = q->getColumn(1).getInt64();
      }
    }
    std::int64_t after = 0;
    for (int seen = 0; seen < kOverviewBlockedCap;) {
      const std::vector<Row> heads = impl_->store.BlockedHeads(now, after, 200);
      for (const Row& head : heads) ++topics[head.topic].blocked_keys;
      seen += static_cast<int>(heads.size());
      if (heads.size() < 200) break;
      after = heads.back().id;
    }
    std::vector<TopicOverview> out;
    for (auto& [name, t] : topics) {
      t.topic = name;
      out.push_back(std::move(t));
    }
    return out;
  });
}

std::vector<AuditEntry> Operator::AuditPage(std::int64_t before_id, int limit,
                                            std::optional<std::int64_t> row_id) {
  if (limit < 1 || limit > kMaxPageRows) {
    throw std::invalid_argument("limit: expected 1 to " + std::to_string(kMaxPageRows));
  }
  return Wrap("read audit", [&] {
    StatementUse q(impl_->Prepare(row_id ? sql::kAuditOfRow : sql::kAuditPage));
    q->bind(1, before_id > 0 ? before_id : kMaxId);
    q->bind(2, limit);
    if (row_id) q->bind(3, *row_id);
    std::vector<AuditEntry> entries;
    while (q->executeStep()) entries.push_back(ReadAudit(*q));
    return entries;
  });
}

}  // namespace outbox::store
