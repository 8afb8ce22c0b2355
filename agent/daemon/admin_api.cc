#include "admin_api.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <charconv>
#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

#include "util/clock.h"
#include "util/rfc3339.h"
#include "util/time_arg.h"
#include "util/utf8.h"

namespace outbox::daemon {
namespace {

using Params = std::map<std::string, std::string, std::less<>>;
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

// A payload longer than this is cut unless the request asks for more.
constexpr std::size_t kDefaultPayloadBytes = 64 * 1024;
constexpr std::size_t kMaxPayloadBytes = 16 * 1024 * 1024;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// application/x-www-form-urlencoded: '+' is a space, %XX a byte.
std::string Decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%' && i + 2 < text.size() && HexDigit(text[i + 1]) >= 0 &&
               HexDigit(text[i + 2]) >= 0) {
      out += static_cast<char>(HexDigit(text[i + 1]) * 16 + HexDigit(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

Params ParseQuery(std::string_view query) {
  Params params;
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    std::string name = Decode(pair.substr(0, eq));
    std::string value = eq == std::string_view::npos ? "" : Decode(pair.substr(eq + 1));
    if (!params.emplace(std::move(name), std::move(value)).second) {
      throw std::invalid_argument(std::string(pair.substr(0, eq)) + ": given twice");
    }
  }
  return params;
}

std::int64_t Number(const std::string& name, const std::string& text, std::int64_t min,
                    std::int64_t max) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    throw std::invalid_argument(name + ": expected an integer from " + std::to_string(min) +
                                " to " + std::to_string(max));
  }
  return value;
}

std::optional<std::int64_t> Time(const Params& params, const char* name) {
  const auto it = params.find(name);
  if (it == params.end() || it->second.empty()) return std::nullopt;
  try {
    return util::ParseTimeArg(it->second, util::NowMs());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(name) + ": " + e.what());
  }
}

// The filter fields; every other name is refused so that a typo in a bulk
// action's filter cannot widen it.
store::MessageQuery ToQuery(const Params& params, std::initializer_list<const char*> also) {
  static constexpr const char* kFields[] = {
      "status",       "topic",        "key",         "key_prefix", "created_from",
      "created_until", "updated_from", "updated_until", "dead_reason", "error"};
  for (const auto& entry : params) {
    const std::string& name = entry.first;  // a structured binding cannot be captured (C++20)
    bool known = std::find_if(std::begin(kFields), std::end(kFields),
                              [&](const char* f) { return name == f; }) != std::end(kFields);
    for (const char* extra : also) known = known || name == extra;
    if (!known) throw std::invalid_argument(name + ": unknown filter field");
  }
  store::MessageQuery query;
  const auto text = [&](const char* name) -> std::optional<std::string> {
    const auto it = params.find(name);
    if (it == params.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
  if (auto status = text("status")) {
    query.status = store::ParseStatus(*status);
    if (!query.status) {
      throw std::invalid_argument("status: expected pending, in_flight, delivered or dead");
    }
  }
  query.topic = text("topic");
  query.key = text("key");
  query.key_prefix = text("key_prefix");
  query.dead_reason = text("dead_reason");
  query.error_text = text("error");
  query.created_from = Time(params, "created_from");
  query.created_until = Time(params, "created_until");
  query.updated_from = Time(params, "updated_from");
  query.updated_until = Time(params, "updated_until");
  query.Validate();
  return query;
}

void String(Writer& w, const char* key, std::string_view value) {
  w.Key(key);
  const std::string valid = util::ToValidUtf8(value);
  w.String(valid.data(), static_cast<rapidjson::SizeType>(valid.size()));
}

void OptionalString(Writer& w, const char* key, const std::optional<std::string>& value) {
  if (value) {
    String(w, key, *value);
  } else {
    w.Key(key);
    w.Null();
  }
}

void Int(Writer& w, const char* key, std::int64_t value) {
  w.Key(key);
  w.Int64(value);
}

void OptionalInt(Writer& w, const char* key, const std::optional<std::int64_t>& value) {
  w.Key(key);
  value ? static_cast<void>(w.Int64(*value)) : static_cast<void>(w.Null());
}

std::string HexOf(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    out += kDigits[static_cast<unsigned char>(c) >> 4];
    out += kDigits[static_cast<unsigned char>(c) & 15];
  }
  return out;
}

// Every attribute of a row; with `payload_limit`, headers and the payload
// too (as text when it is UTF-8, else as hex), cut at that many bytes.
void WriteRow(Writer& w, const store::Row& row, std::optional<std::size_t> payload_limit) {
  w.StartObject();
  Int(w, "id", row.id);
  String(w, "topic", row.topic);
  String(w, "msg_key", row.key);
  const bool acked = row.acked_at && row.status == store::Status::kPending;
  String(w, "status", acked ? "acknowledged" : store::StatusName(row.status));
  Int(w, "attempts", row.attempts);
  Int(w, "next_attempt_at", row.next_attempt_at);
  Int(w, "created_at", row.created_at);
  Int(w, "updated_at", row.updated_at);
  OptionalString(w, "dead_reason", row.dead_reason);
  OptionalString(w, "last_error", row.last_error);
  OptionalString(w, "ordering_key", row.ordering_key);
  OptionalString(w, "schema_version", row.schema_version);
  OptionalInt(w, "deliver_at", row.deliver_at);
  OptionalInt(w, "expires_at", row.expires_at);
  OptionalInt(w, "acked_at", row.acked_at);
  OptionalString(w, "lease_owner", row.lease_owner);
  OptionalInt(w, "last_attempt_at", row.last_attempt_at);
  Int(w, "crashes", row.crashes);
  Int(w, "operator_retries", row.operator_retries);
  w.Key("quarantined");
  w.Bool(row.quarantined);
  if (payload_limit) {
    OptionalString(w, "headers", row.headers_json);
    Int(w, "payload_bytes", static_cast<std::int64_t>(row.payload.size()));
    const bool cut = row.payload.size() > *payload_limit;
    w.Key("payload_truncated");
    w.Bool(cut);
    const std::string_view shown = std::string_view(row.payload).substr(0, *payload_limit);
    if (util::IsValidUtf8(row.payload)) {
      String(w, "payload", util::TruncateUtf8(shown, *payload_limit));
    } else {
      String(w, "payload_hex", HexOf(shown));
    }
  }
  w.EndObject();
}

void WriteAudit(Writer& w, const std::vector<store::AuditEntry>& entries) {
  w.StartArray();
  for (const store::AuditEntry& entry : entries) {
    w.StartObject();
    Int(w, "id", entry.id);
    Int(w, "at", entry.at);
    String(w, "actor", entry.actor);
    String(w, "host", entry.host);
    String(w, "action", entry.action);
    Int(w, "rows", entry.rows);
    OptionalInt(w, "row_id", entry.row_id);
    String(w, "detail", entry.detail);
    w.EndObject();
  }
  w.EndArray();
}

std::string Done(const rapidjson::StringBuffer& buffer) {
  return std::string(buffer.GetString(), buffer.GetSize());
}

// "messages/7/retry" → {"messages", "7", "retry"}
std::vector<std::string> Segments(std::string_view path) {
  std::vector<std::string> out;
  while (!path.empty()) {
    const std::size_t slash = path.find('/');
    out.push_back(Decode(path.substr(0, slash)));
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
  }
  return out;
}

// The body of a bulk action: {"filter": {...}, "dry_run": true} or
// {"filter": {...}, "expected": N, "tolerance": M}.
struct BulkBody {
  store::MessageQuery query;
  bool dry_run = false;
  store::BulkConfirmation confirm;
};

BulkBody ParseBulkBody(const std::string& body) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    throw std::invalid_argument("body: expected a JSON object");
  }
  // Read through a const reference: C++20 finds rapidjson's non-const
  // iterator comparison ambiguous.
  const rapidjson::Value& root = doc;
  BulkBody out;
  Params filter;
  if (auto it = root.FindMember("filter"); it != root.MemberEnd()) {
    if (!it->value.IsObject()) throw std::invalid_argument("filter: expected an object");
    for (const auto& member : it->value.GetObject()) {
      const std::string name(member.name.GetString(), member.name.GetStringLength());
      if (member.value.IsString()) {
        filter[name] = std::string(member.value.GetString(), member.value.GetStringLength());
      } else if (member.value.IsInt64()) {
        filter[name] = std::to_string(member.value.GetInt64());
      } else {
        throw std::invalid_argument("filter." + name + ": expected a string or an integer");
      }
    }
  }
  out.query = ToQuery(filter, {});
  const auto count = [&](const char* name) -> std::optional<std::int64_t> {
    const auto it = root.FindMember(name);
    if (it == root.MemberEnd()) return std::nullopt;
    if (!it->value.IsInt64() || it->value.GetInt64() < 0) {
      throw std::invalid_argument(std::string(name) + ": expected an integer >= 0");
    }
    return it->value.GetInt64();
  };
  if (auto it = root.FindMember("dry_run"); it != root.MemberEnd()) {
    if (!it->value.IsBool()) throw std::invalid_argument("dry_run: expected true or false");
    out.dry_run = it->value.GetBool();
  }
  const std::optional<std::int64_t> expected = count("expected");
  if (!out.dry_run && !expected) {
    throw std::invalid_argument(
        "expected: required unless dry_run is true (run the dry run first and send its count)");
  }
  out.confirm.expected = expected.value_or(0);
  out.confirm.tolerance = count("tolerance").value_or(0);
  return out;
}

}  // namespace

ApiResponse ApiError(int status, const std::string& message) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  String(w, "error", message);
  w.EndObject();
  return {status, Done(buffer)};
}

AdminApi::AdminApi(std::string db_path, AgentSlot& slot, std::function<std::string()> config_json)
    : db_path_(std::move(db_path)), slot_(slot), config_json_(std::move(config_json)) {}

AdminApi::~AdminApi() = default;

bool AdminApi::Acts(const std::string& method) { return method != "GET" && method != "HEAD"; }

store::Store& AdminApi::Db() {
  if (!store_) {
    store::Options options;
    options.path = db_path_;
    options.cache_kib = 2048;
    store_ = std::make_unique<store::Store>(options);
  }
  return *store_;
}

ApiResponse AdminApi::Handle(const ApiRequest& request) {
  try {
    return Route(request);
  } catch (const std::invalid_argument& e) {
    return ApiError(400, e.what());
  } catch (const store::InFlightError& e) {
    return ApiError(409, e.what());
  } catch (const std::exception& e) {
    store_.reset();  // a broken connection is opened again next time
    return ApiError(500, e.what());
  }
}

namespace {

ApiResponse Overview(store::Store& db, AgentSlot& slot) {
  const std::int64_t now = util::NowMs();
  const std::vector<store::TopicOverview> topics = store::Operator(db).Overview(now);
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  Int(w, "now", now);
  w.Key("agent_running");
  w.Bool(slot.Running());
  w.Key("topics");
  w.StartArray();
  for (const store::TopicOverview& t : topics) {
    w.StartObject();
    String(w, "topic", t.topic);
    Int(w, "pending", t.pending);
    Int(w, "due", t.due);
    Int(w, "scheduled", t.scheduled);
    Int(w, "in_flight", t.in_flight);
    Int(w, "dead", t.dead);
    Int(w, "oldest_due_age_ms", t.oldest_due_age_ms);
    Int(w, "delivered_last_minute", t.delivered_last_minute);
    Int(w, "blocked_keys", t.blocked_keys);
    w.EndObject();
  }
  w.EndArray();
  w.Key("breakers");
  w.StartArray();
  for (const agent::BreakerState& breaker : slot.Breakers()) {
    w.StartObject();
    String(w, "endpoint", breaker.endpoint);
    String(w, "state", breaker.state);
    Int(w, "consecutive_failures", breaker.consecutive_failures);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return {200, Done(buffer)};
}

ApiResponse ListMessages(store::Store& db, const Params& params) {
  store::PageRequest page;
  if (auto it = params.find("limit"); it != params.end()) {
    page.limit = static_cast<int>(Number("limit", it->second, 1, 1000));
  }
  if (auto it = params.find("cursor"); it != params.end()) page.cursor = it->second;
  const store::MessageQuery query = ToQuery(params, {"limit", "cursor"});
  const store::MessagePage result = store::Operator(db).ListMessages(query, page);
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  String(w, "filter", query.Describe());
  w.Key("rows");
  w.StartArray();
  for (const store::Row& row : result.rows) WriteRow(w, row, std::nullopt);
  w.EndArray();
  String(w, "next_cursor", result.next_cursor);
  Int(w, "scanned", result.scanned);
  w.Key("scan_bounded");
  w.Bool(result.scan_bounded);
  w.EndObject();
  return {200, Done(buffer)};
}

ApiResponse ShowMessage(store::Store& db, std::int64_t id, const Params& params) {
  std::size_t limit = kDefaultPayloadBytes;
  for (const auto& [name, value] : params) {
    if (name != "payload_bytes") throw std::invalid_argument(name + ": unknown parameter");
    limit = static_cast<std::size_t>(
        Number("payload_bytes", value, 0, static_cast<std::int64_t>(kMaxPayloadBytes)));
  }
  const std::optional<store::Row> row = db.Get(id);
  if (!row) return ApiError(404, "no message with id " + std::to_string(id));
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("message");
  WriteRow(w, *row, limit);
  w.Key("audit");
  WriteAudit(w, store::Operator(db).AuditPage(0, 100, id));
  w.EndObject();
  return {200, Done(buffer)};
}

ApiResponse Audit(store::Store& db, const Params& params) {
  std::int64_t before = 0;
  int limit = 100;
  for (const auto& [name, value] : params) {
    if (name == "before") {
      before = Number("before", value, 0, std::numeric_limits<std::int64_t>::max());
    } else if (name == "limit") {
      limit = static_cast<int>(Number("limit", value, 1, 1000));
    } else {
      throw std::invalid_argument(name + ": unknown parameter");
    }
  }
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("entries");
  WriteAudit(w, store::Operator(db).AuditPage(before, limit));
  w.EndObject();
  return {200, Done(buffer)};
}

ApiResponse ActOnOne(store::Store& db, std::int64_t id, const std::string& name,
                     const store::Actor& actor) {
  const std::optional<store::BulkAction> action = store::ParseBulkAction(name);
  if (!action) return ApiError(404, "no such action: " + name);
  store::RowSelector selector;
  selector.id = id;
  store::Operator op(db);
  const std::int64_t now = util::NowMs();
  int changed = 0;
  switch (*action) {
    case store::BulkAction::kRetry:
      changed = op.Retry(selector, actor, now);
      break;
    case store::BulkAction::kCancel:
      changed = op.Cancel(selector, actor, now);
      break;
    case store::BulkAction::kMarkDelivered:
      changed = op.MarkDelivered(selector, actor, now);
      break;
  }
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  Int(w, "changed", changed);
  w.EndObject();
  return {200, Done(buffer)};
}

ApiResponse Bulk(store::Store& db, const std::string& name, const std::string& body,
                 const store::Actor& actor) {
  const std::optional<store::BulkAction> action = store::ParseBulkAction(name);
  if (!action) return ApiError(404, "no such action: " + name);
  const BulkBody request = ParseBulkBody(body);
  store::Operator op(db);
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  String(w, "filter", request.query.Describe());
  int status = 200;
  if (request.dry_run) {
    const store::BulkCount count = op.CountForAction(*action, request.query);
    Int(w, "matched", count.matched);
    Int(w, "in_flight", count.in_flight);
  } else {
    const store::BulkResult result =
        op.ApplyToMatching(*action, request.query, request.confirm, actor, util::NowMs());
    w.Key("applied");
    w.Bool(result.applied);
    Int(w, "matched", result.count.matched);
    Int(w, "in_flight", result.count.in_flight);
    Int(w, "changed", result.changed);
    if (!result.applied) {
      status = 409;
      String(w, "error",
             "the filter now selects " + std::to_string(result.count.matched) + " rows, not " +
                 std::to_string(request.confirm.expected) + " (tolerance " +
                 std::to_string(request.confirm.tolerance) + "); nothing changed: preview again");
    }
  }
  w.EndObject();
  return {status, Done(buffer)};
}

}  // namespace

ApiResponse AdminApi::Route(const ApiRequest& request) {
  const std::vector<std::string> parts = Segments(request.path);
  const auto id_of = [&](const std::string& text) {
    return Number("id", text, 1, std::numeric_limits<std::int64_t>::max());
  };
  const bool get = request.method == "GET" || request.method == "HEAD";
  const Params params = get ? ParseQuery(request.query) : Params{};
  if (get && parts.size() == 1 && parts[0] == "overview") return Overview(Db(), slot_);
  if (get && parts.size() == 1 && parts[0] == "messages") return ListMessages(Db(), params);
  if (get && parts.size() == 2 && parts[0] == "messages") {
    return ShowMessage(Db(), id_of(parts[1]), params);
  }
  if (get && parts.size() == 1 && parts[0] == "audit") return Audit(Db(), params);
  if (get && parts.size() == 1 && parts[0] == "config") return {200, config_json_()};
  if (request.method == "POST" && parts.size() == 3 && parts[0] == "messages") {
    return ActOnOne(Db(), id_of(parts[1]), parts[2], request.actor);
  }
  if (request.method == "POST" && parts.size() == 2 && parts[0] == "bulk") {
    return Bulk(Db(), parts[1], request.body, request.actor);
  }
  return ApiError(404, "no such route: " + request.method + " /admin/api/" + request.path);
}

}  // namespace outbox::daemon
