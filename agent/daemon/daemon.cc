#include "daemon.h"

#include <poll.h>
#include <signal.h>
#include <spdlog/logger.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "admin_server.h"
#include "agent_slot.h"
#include "config_file.h"
#include "heartbeat.h"
#include "logging.h"
#include "metrics_server.h"
#include "service_notify.h"
#include "util/listen_address.h"
#include "util/unique_fd.h"

namespace outbox::daemon {
namespace {

const char* SignalName(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
  }
  return "signal";
}

sigset_t DaemonSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  return signals;
}

using Fd = util::UniqueFd;

Fd MakeEventFd() {
  const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  return Fd(fd);
}

void Notify(const Fd& event) {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(event.get(), &one, sizeof one);
}

void Drain(const Fd& event) {
  std::uint64_t count = 0;
  [[maybe_unused]] const ssize_t got = ::read(event.get(), &count, sizeof count);
}

agent::Options AgentOptions(const agent::Config& config, const std::string& db_path,
                            const std::shared_ptr<agent::Metrics>& metrics,
                            const std::shared_ptr<spdlog::logger>& logger) {
  agent::Options options = config.options;
  options.db_path = db_path;
  options.watch_external_commits = true;  // the whole point of the sidecar
  options.metrics = metrics;
  options.logger = logger;
  return options;
}

// The two-signal stop. The first stop signal takes the agent out of the slot
// and stops it on a helper thread, with the grace period, so that the signal
// loop keeps reading; the second cuts the grace short. Used by the thread
// that runs Wait(); the helper touches only failed_ and done_.
class TwoSignalStop {
 public:
  TwoSignalStop(std::shared_ptr<spdlog::logger> logger, std::chrono::milliseconds grace)
      : logger_(std::move(logger)), grace_(grace) {}

  bool begun() const { return begun_; }
  // Readable once the agent has stopped.
  int done_fd() const { return done_.get(); }

  void Begin(int signal, std::unique_ptr<agent::Agent> agent) {
    logger_->info("{} received: stopping (grace {} ms; send it again to stop at once)",
                  SignalName(signal), grace_.count());
    begun_ = true;
    agent_ = std::move(agent);
    thread_ = std::jthread([this, running = agent_.get()] {
      try {
        if (running != nullptr) running->Stop(grace_);
      } catch (const std::exception& e) {
        logger_->error("stop failed: {}", e.what());
        failed_ = true;
      }
      Notify(done_);
    });
  }

  void CutShort(int signal) {
    if (cut_) return;
    cut_ = true;
    logger_->warn("{} received again: aborting sends in flight", SignalName(signal));
    // Agent::Stop may be called again while it runs: the shorter deadline
    // wins.
    if (agent_) agent_->Stop(std::chrono::milliseconds(0));
  }

  // Joins the helper; true when the stop failed.
  bool Finish() {
    if (thread_.joinable()) thread_.join();
    return failed_;
  }

 private:
  const std::shared_ptr<spdlog::logger> logger_;
  const std::chrono::milliseconds grace_;
  Fd done_ = MakeEventFd();
  std::atomic<bool> failed_ = false;
  bool begun_ = false;
  bool cut_ = false;
  std::unique_ptr<agent::Agent> agent_;
  std::jthread thread_;  // last: joined before the rest goes
};

}  // namespace

void BlockDaemonSignals() {
  const sigset_t signals = DaemonSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

struct Daemon::Impl {
  Impl(DaemonOptions daemon_options, agent::Config running_config,
       std::shared_ptr<spdlog::logger> log)
      : options(std::move(daemon_options)),
        config(std::move(running_config)),
        logger(std::move(log)) {}

  std::unique_ptr<agent::Agent> MakeAgent(const agent::Config& with) {
    return std::make_unique<agent::Agent>(AgentOptions(with, options.db_path, metrics, logger));
  }

  int Start();
  int Wait();
  void Reload();
  // After a reload whose configuration did not start: the previous one
  // again, or no agent at all (saying why on /healthz) when that fails too.
  void FallBack(const std::string& failure);

  using QueuedSignal = std::pair<int, std::promise<void>>;
  std::optional<QueuedSignal> PopSignal() {
    std::lock_guard lock(queue_mutex);
    if (queue.empty()) return std::nullopt;
    QueuedSignal next = std::move(queue.front());
    queue.pop_front();
    return next;
  }

  const DaemonOptions options;
  agent::Config config;  // the one running
  std::shared_ptr<spdlog::logger> logger;
  // Counters survive reloads: Prometheus expects them never to go down.
  std::shared_ptr<agent::Metrics> metrics = std::make_shared<agent::Metrics>();
  AgentSlot slot;
  std::optional<MetricsServer> server;  // after slot: it serves from the slot
  // The effective config, redacted, for the admin API's thread.
  std::mutex printed_mutex;
  std::string printed_config;  // guarded by printed_mutex
  std::optional<AdminServer> admin;  // after slot: it serves from the slot
  ServiceNotifier notifier;
  Heartbeat heartbeat{notifier, slot, logger,
                      std::chrono::milliseconds(config.options.sweep_interval_ms)};

  // Signals handed in by Signal(), woken through `wake`.
  std::mutex queue_mutex;
  std::deque<QueuedSignal> queue;  // guarded by queue_mutex
  bool waited = false;             // guarded by queue_mutex
  Fd wake = MakeEventFd();
};

int Daemon::Impl::Start() {
  // The database first: a file that is not an outbox database is the most
  // likely start-up failure and gets its own exit status.
  std::unique_ptr<agent::Agent> agent;
  try {
    agent = MakeAgent(config);
  } catch (const std::invalid_argument& e) {
    logger->critical("{}: {}", options.config_path, e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    logger->critical("cannot open the database: {}", e.what());
    return kExitFailure;
  }

  if (!config.metrics_listen.empty()) {
    // ParseConfig has checked the address already.
    const std::optional<util::ListenAddress> address =
        util::ParseListenAddress(config.metrics_listen);
    try {
      server.emplace(address.value(), slot, metrics, logger);
    } catch (const std::exception& e) {
      logger->critical("{}", e.what());
      return kExitFailure;
    }
    logger->info("metrics listening on {}:{}", address->host, server->port());
  }

  if (!config.admin.listen.empty()) {
    printed_config = agent::EffectiveConfigJson(config);
    try {
      admin.emplace(config.admin, options.db_path, slot, metrics,
                    [this] {
                      std::lock_guard lock(printed_mutex);
                      return printed_config;
                    },
                    logger);
    } catch (const std::exception& e) {
      logger->critical("{}", e.what());
      return kExitFailure;
    }
    logger->info("admin console on {} (port {})", config.admin.listen, admin->port());
  }

  try {
    agent->Start();
  } catch (const std::invalid_argument& e) {
    // The config disagrees with what the database records (a topic's
    // ordering, a hook's table): a bad config, as at parse time.
    logger->critical("{}: {}", options.config_path, e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    logger->critical("cannot start the agent: {}", e.what());
    return kExitFailure;
  }
  slot.Put(std::move(agent));
  if (server) server->Start();
  if (admin) admin->Start();
  logger->info("outboxd started db={} config={} topics={}", options.db_path, options.config_path,
               config.options.topics.size());
  // The schema is checked and the agent runs: systemd may start what needs us.
  notifier.Ready(heartbeat.Summary());
  return kExitOk;
}

int Daemon::Impl::Wait() {
  std::optional<Fd> signal_fd;
  if (options.read_process_signals) {
    const sigset_t signals = DaemonSignals();
    signal_fd.emplace(::signalfd(-1, &signals, SFD_CLOEXEC));
    if (signal_fd->get() < 0) throw std::system_error(errno, std::generic_category(), "signalfd");
  }
  TwoSignalStop stop(logger, options.stop_grace);
  const auto handle = [&](int signal) {
    if (signal == SIGHUP) {
      stop.begun() ? logger->info("SIGHUP ignored: stopping") : Reload();
    } else if (!stop.begun()) {
      notifier.Stopping();
      heartbeat.AgentChanged(std::chrono::milliseconds(config.options.sweep_interval_ms),
                             "stopping");
      // Out of the slot first: /healthz turns 503 and no handler uses it.
      stop.Begin(signal, slot.Take());
    } else {
      stop.CutShort(signal);
    }
  };

  for (;;) {
    // poll() ignores the entry of a negative descriptor.
    pollfd fds[3] = {{stop.done_fd(), POLLIN, 0},
                     {wake.get(), POLLIN, 0},
                     {signal_fd ? signal_fd->get() : -1, POLLIN, 0}};
    if (::poll(fds, 3, heartbeat.PollTimeoutMs()) < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "poll");
    }
    heartbeat.Beat();
    if ((fds[0].revents & POLLIN) != 0) break;
    signalfd_siginfo info{};
    if ((fds[2].revents & POLLIN) != 0 &&
        ::read(signal_fd->get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      handle(static_cast<int>(info.ssi_signo));
    }
    if ((fds[1].revents & POLLIN) != 0) {
      Drain(wake);
      while (std::optional<QueuedSignal> next = PopSignal()) {
        handle(next->first);
        next->second.set_value();
      }
    }
  }
  const bool failed = stop.Finish();
  {
    std::lock_guard lock(queue_mutex);
    waited = true;
    for (auto& [signal, done] : queue) done.set_value();
    queue.clear();
  }
  logger->info("outboxd stopped");
  return failed ? kExitFailure : kExitOk;
}

// SIGHUP: a new agent with the file's current content. An invalid file
// keeps the running agent; the database path and the metrics address need
// a restart.
void Daemon::Impl::Reload() {
  logger->info("SIGHUP received: reloading {}", options.config_path);
  notifier.Reloading();
  // READY=1 again whatever the outcome: the daemon runs on (systemd waits
  // for it after RELOADING=1).
  struct ReadyAgain {
    Impl& impl;
    ~ReadyAgain() {
      impl.heartbeat.AgentChanged(std::chrono::milliseconds(impl.config.options.sweep_interval_ms),
                                  impl.slot.Running() ? "" : impl.slot.WhyNotRunning());
      impl.notifier.Ready(impl.heartbeat.Summary());
    }
  } ready_again{*this};
  agent::Config fresh_config;
  std::unique_ptr<agent::Agent> fresh;
  try {
    fresh_config = LoadConfigFile(options.config_path);
    fresh = MakeAgent(fresh_config);
  } catch (const std::exception& e) {
    logger->error("reload failed, keeping the running configuration: {}", e.what());
    return;
  }
  for (const std::string& warning : fresh_config.warnings) {
    logger->warn("{}: {}", options.config_path, warning);
  }
  if (fresh_config.admin.listen != config.admin.listen) {
    logger->warn("admin.listen changed to \"{}\"; it takes effect after a restart",
                 fresh_config.admin.listen);
    fresh_config.admin.listen = config.admin.listen;
  }
  if (fresh_config.metrics_listen != config.metrics_listen) {
    logger->warn("metrics.listen changed to \"{}\"; it takes effect after a restart",
                 fresh_config.metrics_listen);
    fresh_config.metrics_listen = config.metrics_listen;
  }
  ApplyLogging(*logger, fresh_config);

  // One agent at a time: the old one's rows go back to pending and the new
  // one picks them up.
  std::unique_ptr<agent::Agent> old = slot.Take();
  if (old) old->Stop(options.reload_grace);
  old.reset();
  try {
    fresh->Start();
  } catch (const std::exception& e) {
    fresh.reset();
    FallBack(e.what());
    return;
  }
  config = std::move(fresh_config);
  // The tokens and the printed config of the configuration that runs.
  if (admin) admin->SetTokens(config.admin.tokens);
  {
    std::lock_guard lock(printed_mutex);
    printed_config = agent::EffectiveConfigJson(config);
  }
  logger->info("reloaded topics={}", config.options.topics.size());
  slot.Put(std::move(fresh));
}

void Daemon::Impl::FallBack(const std::string& failure) {
  logger->error("the reloaded configuration does not start ({}); back to the previous one",
                failure);
  ApplyLogging(*logger, config);
  try {
    std::unique_ptr<agent::Agent> previous = MakeAgent(config);
    previous->Start();
    slot.Put(std::move(previous));
    return;
  } catch (const std::exception& e) {
    // The database changed under the previous configuration too (a hook's
    // table dropped, an ordering recorded): the daemon stays up, delivers
    // nothing and says why until a reload brings a configuration that starts.
    const std::string reason = "the reloaded configuration does not start (" + failure +
                               ") and neither does the previous one (" + e.what() +
                               "); fix " + options.config_path + " and send SIGHUP";
    logger->critical("no agent runs: {}", reason);
    slot.MarkDown(reason);
  }
}

Daemon::Daemon(DaemonOptions options, agent::Config config,
               std::shared_ptr<spdlog::logger> logger)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(config), std::move(logger))) {}

Daemon::~Daemon() = default;

int Daemon::Start() { return impl_->Start(); }

int Daemon::metrics_port() const { return impl_->server ? impl_->server->port() : 0; }

int Daemon::Wait() { return impl_->Wait(); }

int Daemon::Run() {
  const int status = Start();
  return status == kExitOk ? Wait() : status;
}

std::future<void> Daemon::Signal(int signal) {
  std::promise<void> done;
  std::future<void> handled = done.get_future();
  {
    std::lock_guard lock(impl_->queue_mutex);
    if (impl_->waited) {
      done.set_value();
      return handled;
    }
    impl_->queue.emplace_back(signal, std::move(done));
  }
  Notify(impl_->wake);
  return handled;
}

}  // namespace outbox::daemon
