// The message id: the Idempotency-Key (and ce-id, webhook-id) of a message.
// One implementation, shared by the transport that sends it and by outboxctl
// that reconciles with a receiver. Internal to edge-outbox; thread-safe.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace outbox::util {

// Lowercase hex SHA-256 over (database_id, topic, key), each field preceded
// by its length as 8 bytes big endian, so ("ab","c") and ("a","bc") never
// hash alike. Identical on every retry, unique across devices (each database
// has its own id). Throws std::runtime_error if OpenSSL fails.
std::string MessageId(std::string_view database_id, std::string_view topic, std::string_view key);

// Lowercase hex SHA-256 over `fields`, each preceded by its length as 8
// bytes big endian: MessageId's hash, and a batch's id over its members'.
// Throws std::runtime_error if OpenSSL fails.
std::string LengthPrefixedSha256Hex(std::span<const std::string_view> fields);

}  // namespace outbox::util
