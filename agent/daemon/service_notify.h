// Tells the service manager how outboxd is doing (systemd's Type=notify,
// sd_notify(3)): READY=1 once the agent runs, STATUS= lines, RELOADING=1 and
// STOPPING=1, and WATCHDOG=1 pings when WatchdogSec= asks for them. Without
// NOTIFY_SOCKET in the environment every call does nothing. Internal to the
// daemon library; used by the thread that runs Daemon::Wait() (and Start()).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace outbox::daemon {

class ServiceNotifier {
 public:
  // Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID once.
  ServiceNotifier();

  bool enabled() const { return enabled_; }
  // The manager's watchdog interval when it expects pings from this
  // process, else nullopt.
  std::optional<std::chrono::microseconds> watchdog() const { return watchdog_; }

  // READY=1 with a STATUS= line.
  void Ready(std::string_view status);
  // RELOADING=1 (SIGHUP): READY=1 follows once the reload is done.
  void Reloading();
  void Stopping();
  // STATUS=; one line (CR/LF become spaces). Sent only when it changed.
  void Status(std::string_view status);
  void WatchdogPing();

 private:
  void Send(const std::string& state);

  bool enabled_ = false;
  std::optional<std::chrono::microseconds> watchdog_;
  std::string last_status_;
};

}  // namespace outbox::daemon
