// Invariants every request built by the transport must hold, whatever the
// row said: shared by the fuzz targets.
#pragma once

#include <string_view>

#include "fuzz_input.h"
#include "outbox/transport.h"

namespace outbox::fuzz {

inline bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

inline bool IsToken(std::string_view text) {
  if (text.empty()) return false;
  for (const char c : text) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

// Request headers as BuildHeaders returns them for a message whose id is
// `id`, on an endpoint that configures no headers of its own.
inline void CheckRequestHeaders(const transport::Headers& headers, std::string_view id) {
  int idempotency_keys = 0;
  int content_types = 0;
  for (const auto& [name, value] : headers) {
    FUZZ_CHECK(IsToken(name));
    for (const char c : value) {
      const auto byte = static_cast<unsigned char>(c);
      // No header injection: CR, LF, NUL or any other control byte.
      FUZZ_CHECK(byte >= 0x20 || c == '\t');
      FUZZ_CHECK(byte != 0x7F);
    }
    if (EqualsIgnoreCase(name, "Idempotency-Key")) {
      ++idempotency_keys;
      FUZZ_CHECK(value == id);
    }
    if (EqualsIgnoreCase(name, "Content-Type")) ++content_types;
    // Nothing a row may not set.
    FUZZ_CHECK(!EqualsIgnoreCase(name, "Authorization"));
    FUZZ_CHECK(!EqualsIgnoreCase(name, "Proxy-Authorization"));
    FUZZ_CHECK(!EqualsIgnoreCase(name, "Content-Length"));
    FUZZ_CHECK(!EqualsIgnoreCase(name, "Transfer-Encoding"));
    FUZZ_CHECK(!EqualsIgnoreCase(name, "Host"));
    FUZZ_CHECK(!EqualsIgnoreCase(name, "Connection"));
  }
  FUZZ_CHECK(idempotency_keys == 1);
  FUZZ_CHECK(content_types == 1);
}

}  // namespace outbox::fuzz
