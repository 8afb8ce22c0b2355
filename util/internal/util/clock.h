// The wall clock in the unit the database stores. Internal to edge-outbox.
#pragma once

#include <cstdint>

namespace outbox::util {

// Milliseconds since the Unix epoch, from the system clock. Thread-safe.
std::int64_t NowMs();

}  // namespace outbox::util
