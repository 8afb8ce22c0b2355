// The wall clock in the unit the database stores. Internal to edge-outbox.
#pragma once

#include <cstdint>

namespace outbox::util {

// Milliseconds since the Unix epoch, from the system clock, correct past
// 2038 also where the platform's time_t is 32 bits. Thread-safe.
std::int64_t NowMs();

// The width of the time_t NowMs reads the clock with: 64 on every platform
// (a test holds it there).
int WallClockTimeBits();

}  // namespace outbox::util
