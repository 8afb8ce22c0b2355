// RapidJSON, not cereal's JSON archives: cereal always wraps its output in a
// root object ({"value0": ...}), so it cannot write the top-level array of
// `outboxctl list --json`, and it has no JSON null for an unset optional
// column (lease_owner, last_error, headers). Both are part of the contract.
#include "row_json.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <stdexcept>

#include "util/base64.h"
#include "util/rfc3339.h"
#include "util/utf8.h"

namespace outbox::row_json {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

// Not RapidJSON's kWriteValidateEncodingFlag: that refuses the string (and
// reads a sequence cut short at the end of the text past the buffer).
void WriteString(JsonWriter& json, std::string_view text) {
  if (util::IsValidUtf8(text)) {
    json.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
    return;
  }
  const std::string valid = util::ToValidUtf8(text);
  json.String(valid.data(), static_cast<rapidjson::SizeType>(valid.size()));
}

// One member of the object being written.
void Put(JsonWriter& json, const char* key, std::string_view text) {
  json.Key(key);
  WriteString(json, text);
}
// A column that may be NULL.
void PutNullable(JsonWriter& json, const char* key, const std::optional<std::string>& text) {
  json.Key(key);
  text ? WriteString(json, *text) : (void)json.Null();
}
void PutNullable(JsonWriter& json, const char* key, const std::optional<std::int64_t>& number) {
  json.Key(key);
  number ? (void)json.Int64(*number) : (void)json.Null();
}
void Put(JsonWriter& json, const char* key, int number) {
  json.Key(key);
  json.Int(number);
}
void Put(JsonWriter& json, const char* key, std::int64_t number) {
  json.Key(key);
  json.Int64(number);
}
void Put(JsonWriter& json, const char* key, std::uint64_t number) {
  json.Key(key);
  json.Uint64(number);
}
void Put(JsonWriter& json, const char* key, double number) {
  json.Key(key);
  json.Double(number);
}

// The exact bytes of a text column that WriteString had to repair.
void PutRawIfNotUtf8(JsonWriter& json, const char* key, std::string_view text) {
  if (!util::IsValidUtf8(text)) Put(json, key, util::Base64Encode(text));
}

void WriteRow(JsonWriter& json, const store::Row& row, const RowJsonOptions& options) {
  json.StartObject();
  Put(json, "id", row.id);
  Put(json, "topic", row.topic);
  Put(json, "msg_key", row.key);
  if (options.raw_text_as_base64) {
    PutRawIfNotUtf8(json, "topic_base64", row.topic);
    PutRawIfNotUtf8(json, "msg_key_base64", row.key);
    if (row.headers_json) PutRawIfNotUtf8(json, "headers_base64", *row.headers_json);
    if (row.ordering_key) PutRawIfNotUtf8(json, "ordering_key_base64", *row.ordering_key);
  }
  if (!options.message_id.empty()) Put(json, "message_id", options.message_id);
  Put(json, "status", store::StatusName(row.status));
  Put(json, "attempts", row.attempts);
  Put(json, "next_attempt_at", row.next_attempt_at);
  Put(json, "created_at", row.created_at);
  Put(json, "updated_at", row.updated_at);
  // The last change of a delivered row is its delivery.
  if (row.status == store::Status::kDelivered) Put(json, "delivered_at", row.updated_at);
  PutNullable(json, "lease_owner", row.lease_owner);
  PutNullable(json, "last_error", row.last_error);
  Put(json, "crashes", row.crashes);
  Put(json, "operator_retries", row.operator_retries);
  PutNullable(json, "schema_version", row.schema_version);
  PutNullable(json, "ordering_key", row.ordering_key);
  PutNullable(json, "deliver_at", row.deliver_at);
  PutNullable(json, "expires_at", row.expires_at);
  PutNullable(json, "dead_reason", row.dead_reason);
  // The receiver acknowledged; the completion (a hook) is still pending.
  PutNullable(json, "acked_at", row.acked_at);
  Put(json, "payload_bytes", static_cast<std::uint64_t>(row.payload.size()));
  if (options.with_payload) {
    PutNullable(json, "headers", row.headers_json);
    // JSON strings must be UTF-8: binary payloads go out as base64.
    if (!options.payload_as_base64 && util::IsValidUtf8(row.payload)) {
      Put(json, "payload", row.payload);
    } else {
      Put(json, "payload_base64", util::Base64Encode(row.payload));
    }
  }
  json.EndObject();
}

std::string Take(const rapidjson::StringBuffer& buffer) {
  return {buffer.GetString(), buffer.GetSize()};
}

// Seconds from `then_ms` to `now_ms`, in doubles: created_at may hold any
// value another application wrote, and now - INT64_MIN overflows.
double AgeSeconds(std::int64_t now_ms, std::int64_t then_ms) {
  return (static_cast<double>(now_ms) - static_cast<double>(then_ms)) / 1000.0;
}

}  // namespace

std::string RowToJson(const store::Row& row, const RowJsonOptions& options) {
  rapidjson::StringBuffer buffer;
  JsonWriter json(buffer);
  WriteRow(json, row, options);
  return Take(buffer);
}

std::string RowsToJson(const std::vector<store::Row>& rows, const RowJsonOptions& options) {
  rapidjson::StringBuffer buffer;
  JsonWriter json(buffer);
  json.StartArray();
  for (const store::Row& row : rows) WriteRow(json, row, options);
  json.EndArray();
  return Take(buffer);
}

std::string ArchiveLine(const store::Row& row, std::string_view message_id) {
  RowJsonOptions options;
  options.with_payload = true;
  options.payload_as_base64 = true;
  options.raw_text_as_base64 = true;
  options.message_id = message_id;
  return RowToJson(row, options);
}

namespace {

// The deepest nesting of arrays and objects in `text`, strings skipped;
// stops counting past `limit`.
int NestingUpTo(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return 0;
}

}  // namespace

ArchivedMessage ParseArchiveLine(std::string_view line) {
  // An archive line is one flat object; a hostile file may nest a million
  // levels. Refused before parsing, and parsed without recursion anyway.
  if (NestingUpTo(line, kMaxArchiveNesting) > kMaxArchiveNesting) {
    throw std::invalid_argument("nested deeper than " + std::to_string(kMaxArchiveNesting) +
                                " levels");
  }
  rapidjson::Document document;
  document.Parse<rapidjson::kParseIterativeFlag>(line.data(), line.size());
  if (document.HasParseError() || !document.IsObject()) {
    throw std::invalid_argument("not a JSON object");
  }
  // Const: clang's C++20 rules find rapidjson's mutable iterator comparison
  // ambiguous.
  const rapidjson::Value& object = document;
  const auto text = [&](const char* name, bool required) -> std::optional<std::string> {
    const std::string raw = std::string(name) + "_base64";
    const auto it = object.FindMember(raw.c_str());
    if (it != object.MemberEnd()) {
      if (!it->value.IsString()) throw std::invalid_argument(raw + ": expected a string");
      std::optional<std::string> bytes = util::Base64Decode(
          std::string_view(it->value.GetString(), it->value.GetStringLength()));
      if (!bytes) throw std::invalid_argument(raw + ": not valid base64");
      return bytes;
    }
    const auto plain = object.FindMember(name);
    if (plain == object.MemberEnd() || plain->value.IsNull()) {
      if (required) throw std::invalid_argument(std::string(name) + ": missing");
      return std::nullopt;
    }
    if (!plain->value.IsString()) throw std::invalid_argument(std::string(name) + ": expected a string");
    return std::string(plain->value.GetString(), plain->value.GetStringLength());
  };
  ArchivedMessage message;
  message.topic = *text("topic", true);
  message.key = *text("msg_key", true);
  message.payload = *text("payload", true);
  message.headers_json = text("headers", false);
  message.schema_version = text("schema_version", false);
  message.ordering_key = text("ordering_key", false);
  return message;
}

std::string StatsToJson(const store::Stats& stats, std::string_view database_id,
                        std::int64_t now_ms) {
  rapidjson::StringBuffer buffer;
  JsonWriter json(buffer);
  json.StartObject();
  Put(json, "database_id", database_id);
  Put(json, "undelivered", stats.undelivered);
  Put(json, "db_bytes", stats.db_bytes);
  Put(json, "wal_bytes", stats.wal_bytes);
  json.Key("limits");
  json.StartObject();
  Put(json, "max_payload_bytes", stats.limits.max_payload_bytes);
  Put(json, "max_pending", stats.limits.max_pending);
  Put(json, "max_db_bytes", stats.limits.max_db_bytes);
  json.EndObject();
  json.Key("topics");
  json.StartArray();
  for (const auto& count : stats.counts) {
    json.StartObject();
    Put(json, "topic", count.topic);
    Put(json, "status", store::StatusName(count.status));
    Put(json, "count", count.count);
    Put(json, "oldest_age_seconds", AgeSeconds(now_ms, count.oldest_created_at));
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
  return Take(buffer);
}

std::string AuditToJson(const std::vector<store::AuditEntry>& entries) {
  rapidjson::StringBuffer buffer;
  JsonWriter json(buffer);
  json.StartArray();
  for (const store::AuditEntry& entry : entries) {
    json.StartObject();
    Put(json, "id", entry.id);
    Put(json, "at", util::FormatRfc3339(entry.at));
    Put(json, "at_ms", entry.at);
    Put(json, "actor", entry.actor);
    Put(json, "host", entry.host);
    Put(json, "action", entry.action);
    Put(json, "rows", entry.rows);
    json.Key("row_id");
    entry.row_id ? (void)json.Int64(*entry.row_id) : (void)json.Null();
    Put(json, "detail", entry.detail);
    json.EndObject();
  }
  json.EndArray();
  return Take(buffer);
}

std::string IdsToJson(const std::vector<std::int64_t>& ids) {
  rapidjson::StringBuffer buffer;
  JsonWriter json(buffer);
  json.StartArray();
  for (std::int64_t id : ids) json.Int64(id);
  json.EndArray();
  return Take(buffer);
}

}  // namespace outbox::row_json
