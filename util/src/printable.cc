#include "util/printable.h"

#include <cstdio>

#include "util/utf8.h"

namespace outbox::util {
namespace {

void AppendHex(const char* format, unsigned value, std::string& out) {
  char escaped[8];
  const int n = std::snprintf(escaped, sizeof escaped, format, value);
  out.append(escaped, static_cast<std::size_t>(n));
}

}  // namespace

void AppendEscapedControls(std::string_view text, std::string& out) {
  for (std::size_t at = 0; at < text.size();) {
    const auto byte = static_cast<unsigned char>(text[at]);
    const std::size_t length = Utf8SequenceAt(text, at);
    if (length == 0 || byte < 0x20 || byte == 0x7F) {
      AppendHex("\\x%02x", byte, out);
      ++at;
    } else if (length == 2 && byte == 0xC2 && static_cast<unsigned char>(text[at + 1]) < 0xA0) {
      AppendHex("\\u%04x", static_cast<unsigned char>(text[at + 1]), out);  // C1
      at += 2;
    } else {
      out.append(text.substr(at, length));
      at += length;
    }
  }
}

std::string EscapeControls(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  AppendEscapedControls(text, out);
  return out;
}

}  // namespace outbox::util
