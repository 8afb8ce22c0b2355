// The system clock behind the Clock seam.
#include <chrono>

#include "outbox/agent.h"

namespace outbox::agent {
namespace {

class SystemClockImpl final : public Clock {
 public:
  std::int64_t WallMs() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  std::chrono::steady_clock::time_point Monotonic() override {
    return std::chrono::steady_clock::now();
  }
};

}  // namespace

std::shared_ptr<Clock> SystemClock() {
  static const auto clock = std::make_shared<SystemClockImpl>();
  return clock;
}

}  // namespace outbox::agent
