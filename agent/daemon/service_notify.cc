#include "service_notify.h"

#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace outbox::daemon {

ServiceNotifier::ServiceNotifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket != nullptr && *socket != '\0';
  std::uint64_t usec = 0;
  // > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID, if set, is ours.
  if (enabled_ && sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    watchdog_ = std::chrono::microseconds(static_cast<std::int64_t>(usec));
  }
}

void ServiceNotifier::Send(const std::string& state) {
  // A manager that went away is not outboxd's problem: nothing to report.
  if (enabled_) (void)sd_notify(0, state.c_str());
}

void ServiceNotifier::Ready(std::string_view status) {
  last_status_.clear();
  Send("READY=1");
  Status(status);
}

void ServiceNotifier::Reloading() { Send("RELOADING=1"); }

void ServiceNotifier::Stopping() { Send("STOPPING=1"); }

void ServiceNotifier::Status(std::string_view status) {
  std::string line(status);
  std::replace(line.begin(), line.end(), '\n', ' ');
  std::replace(line.begin(), line.end(), '\r', ' ');
  if (line == last_status_) return;
  last_status_ = line;
  Send("STATUS=" + line);
}

void ServiceNotifier::WatchdogPing() { Send("WATCHDOG=1"); }

}  // namespace outbox::daemon
