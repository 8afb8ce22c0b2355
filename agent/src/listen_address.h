// "host:port" of the metrics endpoint (config key metrics.listen). Internal
// to the agent component: ParseConfig validates with it, outboxd binds with it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace outbox::agent {

struct ListenAddress {
  // A host name or IPv4 address, or an IPv6 address without its brackets.
  std::string host;
  // 0 = any free port (outboxd logs the one it got).
  int port = 0;
};

// Parses "127.0.0.1:9464", "localhost:9464" or "[::1]:9464". nullopt for
// anything else (including "", which means "disabled" in the config).
std::optional<ListenAddress> ParseListenAddress(std::string_view text);

}  // namespace outbox::agent
