// Small text rules shared by headers, bodies and validation.
#include "internal.h"

namespace outbox::transport::internal {
namespace {

char ToLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (ToLower(a[i]) != ToLower(b[i])) return false;
  }
  return true;
}

bool StartsWithIgnoreCase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && EqualsIgnoreCase(text.substr(0, prefix.size()), prefix);
}

bool IsValidHeaderValue(std::string_view value) {
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\t') || byte == 0x7F) return false;
  }
  return true;
}

std::string_view ContentTypeOf(const EndpointOptions& options, const Message& message) {
  for (const Header& header : message.headers) {
    if (EqualsIgnoreCase(header.first, "Content-Type")) return header.second;
  }
  return options.content_type;
}

bool IsJsonContentType(std::string_view content_type) {
  std::string_view media_type = content_type.substr(0, content_type.find(';'));
  while (!media_type.empty() && (media_type.back() == ' ' || media_type.back() == '\t')) {
    media_type.remove_suffix(1);
  }
  const auto ends_with_json = [&] {
    constexpr std::string_view kSuffix = "+json";
    return media_type.size() > kSuffix.size() &&
           EqualsIgnoreCase(media_type.substr(media_type.size() - kSuffix.size()), kSuffix);
  };
  return EqualsIgnoreCase(media_type, "application/json") ||
         EqualsIgnoreCase(media_type, "text/json") || ends_with_json();
}

}  // namespace outbox::transport::internal
