// What an agent publishes about itself in the store's outbox_runtime table,
// so that outboxctl (which links only the store) can show it and use it:
// the lease and retention it runs with, its breakers, its delivery counters
// and when it last swept. Not installed.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "route_table.h"
#include "runtime.h"

namespace outbox::agent {

// Used by the sweeper's thread only.
class RuntimeStatePublisher {
 public:
  // At most this often: outboxctl top refreshes once a second.
  static constexpr std::chrono::milliseconds kMinInterval{250};
  // An unchanged state is written again only this often, as a sign of life
  // (outboxctl top counts an agent silent for 60 s as gone): an idle agent
  // that wrote every sweep put a WAL commit on the flash every second.
  static constexpr std::chrono::milliseconds kHeartbeat{30'000};

  RuntimeStatePublisher(Runtime& runtime, const RouteTable& routes)
      : rt_(runtime), routes_(routes) {}

  // Writes the current state through the writer, unless the last write was
  // less than kMinInterval ago, or the state is unchanged (its last_sweep
  // aside) and the last write less than kHeartbeat ago. Throws what the
  // writer throws.
  void MaybePublish();

  // The name/value pairs of one publication (pure; for tests).
  std::vector<std::pair<std::string, std::string>> State(std::int64_t now_ms) const;

 private:
  Runtime& rt_;
  const RouteTable& routes_;
  std::chrono::steady_clock::time_point last_{};
  // What was last written, last_sweep left out.
  std::vector<std::pair<std::string, std::string>> published_;
};

}  // namespace outbox::agent
