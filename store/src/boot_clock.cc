// The host's boot clock, on which leases are measured (outbox/store.h).
#include <time.h>

#include <fstream>
#include <string>

#include "outbox/store.h"

namespace outbox::store {
namespace {

// Read once: it changes only with a reboot, which this process does not
// survive.
std::string ReadBootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(in >> id)) return "";
  return id;
}

}  // namespace

BootTime SystemBootTime() {
  static const std::string boot_id = ReadBootId();
  timespec now{};
  // CLOCK_BOOTTIME rather than CLOCK_MONOTONIC: a lease must run on while the
  // device is suspended, as it does for the other agents' view of it.
  if (clock_gettime(CLOCK_BOOTTIME, &now) != 0) return {};
  return {boot_id, static_cast<std::int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1'000'000};
}

}  // namespace outbox::store
