#include "util/http_token.h"

namespace outbox::util {

bool IsHttpToken(std::string_view text) {
  if (text.empty()) return false;
  constexpr std::string_view kSymbols = "!#$%&'*+-.^_`|~";
  for (const char c : text) {
    // ASCII only: std::isalnum would follow the locale.
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && kSymbols.find(c) == std::string_view::npos) return false;
  }
  return true;
}

}  // namespace outbox::util
