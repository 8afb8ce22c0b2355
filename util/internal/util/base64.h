// Base64 (RFC 4648 section 4: standard alphabet, with padding), by OpenSSL.
// Internal to edge-outbox; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace outbox::util {

std::string Base64Encode(std::string_view bytes);

// The decoded bytes, or nullopt for anything but the exact padded form
// (whitespace, a wrong length or a foreign character included).
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace outbox::util
