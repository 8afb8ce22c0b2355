// "host:port" listen addresses (outboxd's metrics.listen, the example
// receiver's --listen). Internal to edge-outbox; pure, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace outbox::util {

struct ListenAddress {
  // A host name or IPv4 address, or an IPv6 address without its brackets.
  std::string host;
  // 0 = any free port (the server logs the one it got).
  int port = 0;
};

// Parses "127.0.0.1:9464", "localhost:9464" or "[::1]:9464". nullopt for
// anything else (including "").
std::optional<ListenAddress> ParseListenAddress(std::string_view text);

}  // namespace outbox::util
