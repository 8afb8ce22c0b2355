// Polling with a deadline, for tests that wait on a condition another thread
// or process makes true.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace outbox::testing {

// Polls `condition` until it holds (true) or `limit` passes (false). The
// pause between polls only paces the polling; correctness never depends on
// it.
inline bool WaitFor(const std::function<bool()>& condition,
                    std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace outbox::testing
