// Compiled with _TIME_BITS=64 where time_t is 32 bits (util/CMakeLists.txt):
// glibc then reads the clock through clock_gettime64, which keeps working
// after 2038-01-19. std::chrono::system_clock::now() would not: libstdc++
// implements it in its own library, built with the platform's 32-bit time_t
// on Debian's armhf. Nothing of type time_t leaves this file.
#include "util/clock.h"

#include <time.h>

namespace outbox::util {

std::int64_t NowMs() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1'000'000;
}

int WallClockTimeBits() { return static_cast<int>(sizeof(time_t) * 8); }

}  // namespace outbox::util
