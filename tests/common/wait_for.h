// Polling with a deadline, for tests that wait on a condition another thread
// or process makes true.
#pragma once

#include <chrono>
#include <cstdlib>
#include <functional>
#include <thread>

namespace outbox::testing {

// How much slower than native this run is: OUTBOX_TEST_SLOWDOWN (packaging/
// dev.sh cross sets it under emulation, which is 5-20x slower), else 1.
// Deadlines scale by it; a correctness test never gets skipped for speed.
inline int Slowdown() {
  const char* value = std::getenv("OUTBOX_TEST_SLOWDOWN");
  const int factor = value != nullptr ? std::atoi(value) : 1;
  return factor >= 1 ? factor : 1;
}

// Whether the test runs under qemu-user (OUTBOX_TEST_EMULATED, set by
// packaging/dev.sh cross): bounds on memory or speed are judged natively only,
// since the emulator's own memory grows as it translates code.
inline bool Emulated() {
  const char* value = std::getenv("OUTBOX_TEST_EMULATED");
  return value != nullptr && *value != '\0';
}

// Polls `condition` until it holds (true) or `limit` (times Slowdown())
// passes (false). The pause between polls only paces the polling;
// correctness never depends on it.
inline bool WaitFor(const std::function<bool()>& condition,
                    std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit * Slowdown();
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace outbox::testing
