#include "util/listen_address.h"

#include <charconv>

namespace outbox::util {

std::optional<ListenAddress> ParseListenAddress(std::string_view text) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view host = text.substr(0, colon);
  const std::string_view port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    if (host.empty() || host.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos) {
      return std::nullopt;
    }
  } else if (host.empty() || host.find_first_of(":[] \t/") != std::string_view::npos) {
    return std::nullopt;
  }
  ListenAddress address;
  address.host = host;
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  std::from_chars(port.data(), port.data() + port.size(), address.port);
  if (address.port > 65535) return std::nullopt;
  return address;
}

}  // namespace outbox::util
