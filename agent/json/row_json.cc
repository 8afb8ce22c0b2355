// RapidJSON, not cereal's JSON archives: cereal always wraps its output in a
// root object ({"value0": ...}), so it cannot write the top-level array of
// `outboxctl list --json`, and it has no JSON null for an unset optional
// column (lease_owner, last_error, headers). Both are part of the contract.
#include "row_json.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "util/base64.h"
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

void WriteOptional(JsonWriter& json, const std::optional<std::string>& text) {
  text ? WriteString(json, *text) : (void)json.Null();
}

void WriteRow(JsonWriter& json, const store::Row& row, const RowJsonOptions& options) {
  json.StartObject();
  json.Key("id");
  json.Int64(row.id);
  json.Key("topic");
  WriteString(json, row.topic);
  json.Key("msg_key");
  WriteString(json, row.key);
  if (!options.message_id.empty()) {
    json.Key("message_id");
    WriteString(json, options.message_id);
  }
  json.Key("status");
  WriteString(json, store::StatusName(row.status));
  json.Key("attempts");
  json.Int(row.attempts);
  json.Key("next_attempt_at");
  json.Int64(row.next_attempt_at);
  json.Key("created_at");
  json.Int64(row.created_at);
  json.Key("updated_at");
  json.Int64(row.updated_at);
  if (row.status == store::Status::kDelivered) {
    // The last change of a delivered row is its delivery.
    json.Key("delivered_at");
    json.Int64(row.updated_at);
  }
  json.Key("lease_owner");
  WriteOptional(json, row.lease_owner);
  json.Key("last_error");
  WriteOptional(json, row.last_error);
  json.Key("crashes");
  json.Int(row.crashes);
  json.Key("operator_retries");
  json.Int(row.operator_retries);
  json.Key("payload_bytes");
  json.Uint64(row.payload.size());
  if (options.with_payload) {
    json.Key("headers");
    WriteOptional(json, row.headers_json);
    // JSON strings must be UTF-8: binary payloads go out as base64.
    if (!options.payload_as_base64 && util::IsValidUtf8(row.payload)) {
      json.Key("payload");
      WriteString(json, row.payload);
    } else {
      json.Key("payload_base64");
      WriteString(json, util::Base64Encode(row.payload));
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
  options.message_id = message_id;
  return RowToJson(row, options);
}

std::string StatsToJson(const store::Stats& stats, std::string_view database_id,
                        std::int64_t now_ms) {
  rapidjson::StringBuffer buffer;
  JsonWriter json(buffer);
  json.StartObject();
  json.Key("database_id");
  WriteString(json, database_id);
  json.Key("undelivered");
  json.Int64(stats.undelivered);
  json.Key("db_bytes");
  json.Int64(stats.db_bytes);
  json.Key("wal_bytes");
  json.Int64(stats.wal_bytes);
  json.Key("limits");
  json.StartObject();
  json.Key("max_payload_bytes");
  json.Int64(stats.limits.max_payload_bytes);
  json.Key("max_pending");
  json.Int64(stats.limits.max_pending);
  json.Key("max_db_bytes");
  json.Int64(stats.limits.max_db_bytes);
  json.EndObject();
  json.Key("topics");
  json.StartArray();
  for (const auto& count : stats.counts) {
    json.StartObject();
    json.Key("topic");
    WriteString(json, count.topic);
    json.Key("status");
    WriteString(json, store::StatusName(count.status));
    json.Key("count");
    json.Int64(count.count);
    json.Key("oldest_age_seconds");
    json.Double(AgeSeconds(now_ms, count.oldest_created_at));
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
  return Take(buffer);
}

}  // namespace outbox::row_json
