// The system clock behind the Clock seam.
#include <chrono>

#include "outbox/agent.h"
#include "util/clock.h"

namespace outbox::agent {
namespace {

class SystemClockImpl final : public Clock {
 public:
  // util::NowMs, not std::chrono::system_clock: correct past 2038 on a
  // 32-bit time_t too.
  std::int64_t WallMs() override { return util::NowMs(); }
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
