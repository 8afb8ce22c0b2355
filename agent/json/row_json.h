// Outbox rows and store statistics as JSON: the one serialisation shared by
// the archive writer (retention.archive_path, one object per line) and
// `outboxctl --json`. Internal to edge-outbox (the outbox_row_json target);
// pure functions, thread-safe.
//
// Text columns hold whatever other applications wrote: each byte that is not
// part of valid UTF-8 becomes U+FFFD, so the output always parses.
//
// Row fields, in order: id, topic, msg_key, [message_id], status, attempts,
// next_attempt_at, created_at, updated_at, [delivered_at: delivered rows],
// lease_owner, last_error (null when unset), crashes, operator_retries,
// payload_bytes and, with the payload: headers (the row's JSON text as a
// string, or null), then payload (UTF-8 text) or payload_base64.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "outbox/store.h"

namespace outbox::row_json {

struct RowJsonOptions {
  // Add headers and the payload.
  bool with_payload = false;
  // Always write payload_base64, even for a UTF-8 payload (the archive:
  // bytes come back exactly as they went in).
  bool payload_as_base64 = false;
  // The message's Idempotency-Key; "" leaves the field out.
  std::string_view message_id;
  // Also write topic_base64, msg_key_base64 and headers_base64 for a column
  // that is not valid UTF-8 (its text field then holds U+FFFD in place of
  // the bad bytes): the archive, whose rows must come back byte for byte.
  bool raw_text_as_base64 = false;
};

// One row as a JSON object, without a line end.
std::string RowToJson(const store::Row& row, const RowJsonOptions& options = {});

// Rows as a JSON array.
std::string RowsToJson(const std::vector<store::Row>& rows, const RowJsonOptions& options = {});

// A line of the retention archive, without its line end: the row with its
// payload as base64, its message_id, and the raw bytes of any text column
// that is not valid UTF-8 (raw_text_as_base64). Always valid UTF-8 JSON.
std::string ArchiveLine(const store::Row& row, std::string_view message_id);

// What ParseArchiveLine gives back: the message as it was enqueued, bytes
// exactly as they were.
struct ArchivedMessage {
  std::string topic;
  std::string key;
  std::string payload;
  std::optional<std::string> headers_json;
  // What shapes the resend: the URL and Schema-Version, and the key's order.
  std::optional<std::string> schema_version;
  std::optional<std::string> ordering_key;
};

// Archive lines nest one level (headers are a string); deeper is refused.
inline constexpr int kMaxArchiveNesting = 8;

// Reads one archive line. Throws std::invalid_argument saying what is wrong
// (nested deeper than kMaxArchiveNesting, not JSON, a field missing or of
// the wrong type, bad base64). Parses without recursion.
ArchivedMessage ParseArchiveLine(std::string_view line);

// The store's numbers: database_id, undelivered, db_bytes, wal_bytes,
// limits{max_payload_bytes, max_pending, max_db_bytes} and topics[{topic,
// status, count, oldest_age_seconds}], ages measured against `now_ms`.
std::string StatsToJson(const store::Stats& stats, std::string_view database_id,
                        std::int64_t now_ms);

// Audit rows (`outboxctl audit --json`) as a JSON array of {id, at (RFC
// 3339), at_ms, actor, host, action, rows, row_id (or null), detail}.
std::string AuditToJson(const std::vector<store::AuditEntry>& entries);

// A list of ids as a JSON array of numbers.
std::string IdsToJson(const std::vector<std::int64_t>& ids);

}  // namespace outbox::row_json
