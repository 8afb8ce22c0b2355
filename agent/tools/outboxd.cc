// outboxd: the sidecar daemon (docs/operations.md). Delivers the rows
// that applications in any language insert with plain SQL, serves /metrics
// and /healthz, stops cleanly on SIGTERM/SIGINT and reloads on SIGHUP.
//
// Exit status: 0 after a clean stop or a good --check-config, 1 when the
// database or the environment fails, 2 for bad flags or a bad config. Errors
// before the logger exists are one line on stderr; later ones one log line.
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <iostream>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

#include "listen_address.h"
#include "outbox/agent.h"
#include "prometheus.h"

namespace {

using outbox::agent::Agent;
using outbox::agent::Config;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// SIGTERM/SIGINT: in-flight sends get this long to finish before they are
// aborted and their rows go back to pending. A second signal cuts it short.
constexpr std::chrono::milliseconds kStopGrace{10'000};
// SIGHUP: the old agent's sends in flight get this long.
constexpr std::chrono::milliseconds kReloadGrace{5'000};
// /metrics and /healthz are scraped rarely; two threads are plenty.
constexpr std::size_t kHttpThreads = 2;

// Secrets are never meant to be written inline. The parser still accepts an
// inline credential with a warning (handy in a quick test), but not in a
// file that every user of the machine may read: then the key is named and
// the start (or the reload) is refused. A file readable by its group only
// (root:outbox 0640, as packaged) is fine.
void RefuseWorldReadableInlineSecrets(const std::string& path, const Config& config) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || (st.st_mode & S_IROTH) == 0) return;
  for (const std::string& warning : config.warnings) {
    // config.cc's InlineSecretWarning: "<key path>: secret written inline; ...".
    const auto at = warning.find(": secret written inline");
    if (at == std::string::npos) continue;
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw std::invalid_argument(path + ": " + warning.substr(0, at) +
                                ": secret written inline in a file every user can read (mode " +
                                mode + "); use \"env:NAME\" or \"file:PATH\", or chmod o-r " +
                                path);
  }
}

// Reads the config file and parses it. Throws std::invalid_argument with one
// line naming the file and the problem.
Config LoadConfig(const std::string& path) {
  const auto unreadable = [&] {
    return std::invalid_argument(path + ": cannot read (" + std::strerror(errno) + ")");
  };
  std::ifstream file(path, std::ios::binary);
  if (!file) throw unreadable();
  std::string text;
  try {
    // A directory opens fine and fails only on reading, by throwing.
    text.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure&) {
    throw unreadable();
  }
  if (file.bad()) throw unreadable();
  Config config;
  try {
    config = outbox::agent::ParseConfig(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
  RefuseWorldReadableInlineSecrets(path, config);
  return config;
}

// --- logging ----------------------------------------------------------------

// %* in the JSON pattern: the message as the inside of a JSON string.
class JsonEscapedMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& message, const std::tm& /*time*/,
              spdlog::memory_buf_t& out) override {
    for (char c : message.payload) {
      const auto byte = static_cast<unsigned char>(c);
      if (c == '"' || c == '\\') {
        out.push_back('\\');
        out.push_back(c);
      } else if (byte < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\u%04x", byte);
        out.append(escaped, escaped + 6);
      } else {
        out.push_back(c);
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonEscapedMessage>();
  }
};

void ApplyLogging(spdlog::logger& logger, const Config& config) {
  if (config.log_format == "json") {
    auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    formatter->add_flag<JsonEscapedMessage>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","logger":"%n","message":"%*"})");
    logger.set_formatter(std::move(formatter));
  } else {
    logger.set_formatter(std::make_unique<spdlog::pattern_formatter>("%Y-%m-%d %H:%M:%S.%e %l %v"));
  }
  logger.set_level(spdlog::level::from_str(config.log_level));
}

std::shared_ptr<spdlog::logger> MakeLogger() {
  auto logger = std::make_shared<spdlog::logger>("outboxd",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->flush_on(spdlog::level::trace);  // stderr goes to the journal line by line
  return logger;
}

// --- the running agent --------------------------------------------------------

// The agent that currently delivers, swapped on reload and taken out on stop.
// Every call into it from the HTTP threads happens under the mutex, so main
// never stops or destroys an agent while a handler uses it.
class AgentSlot {
 public:
  void Put(std::unique_ptr<Agent> agent) {
    std::lock_guard lock(mutex_);
    agent_ = std::move(agent);
  }
  std::unique_ptr<Agent> Take() {
    std::lock_guard lock(mutex_);
    return std::move(agent_);
  }
  bool Running() const {
    std::lock_guard lock(mutex_);
    return agent_ != nullptr && agent_->Running();
  }
  // The metrics in `format`, or nullopt when no agent runs.
  std::optional<std::string> RenderMetrics(outbox::agent::MetricsFormat format) {
    std::lock_guard lock(mutex_);
    if (agent_ == nullptr) return std::nullopt;
    return outbox::agent::RenderMetrics(agent_->Snapshot(), format, created_ms_);
  }

 private:
  // The counters count from here: they live as long as the daemon (reloads
  // keep them), and so does this slot. OpenMetrics' _created samples.
  const std::int64_t created_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count();
  mutable std::mutex mutex_;
  std::unique_ptr<Agent> agent_;  // guarded by mutex_
};

outbox::agent::Options AgentOptions(const Config& config, const std::string& db_path,
                                    const std::shared_ptr<outbox::agent::Metrics>& metrics,
                                    const std::shared_ptr<spdlog::logger>& logger) {
  outbox::agent::Options options = config.options;
  options.db_path = db_path;
  options.watch_external_commits = true;  // the whole point of the sidecar
  options.metrics = metrics;
  options.logger = logger;
  return options;
}

// --- /metrics and /healthz ----------------------------------------------------

class MetricsServer {
 public:
  // Binds at once, so that a taken port fails the start rather than a thread.
  // Throws std::runtime_error naming the address.
  MetricsServer(const outbox::agent::ListenAddress& address, AgentSlot& slot,
                std::shared_ptr<const outbox::agent::Metrics> metrics,
                std::shared_ptr<spdlog::logger> logger)
      : logger_(std::move(logger)) {
    server_.new_task_queue = [] { return new httplib::ThreadPool(kHttpThreads); };
    server_.Get("/metrics", [&slot, this](const httplib::Request& request,
                                          httplib::Response& response) {
      try {
        const auto format =
            outbox::agent::NegotiateMetricsFormat(request.get_header_value("Accept"));
        if (auto text = slot.RenderMetrics(format)) {
          response.set_content(*text, std::string(outbox::agent::MetricsContentType(format)));
        } else {
          response.status = 503;
          response.set_content("agent not running\n", "text/plain");
        }
      } catch (const std::exception& e) {
        // A failed database read must not take the server thread down.
        logger_->error("metrics: {}", e.what());
        response.status = 500;
        response.set_content("cannot read metrics\n", "text/plain");
      }
    });
    // 503 with one line of reason when no agent runs or its sweeper keeps
    // failing (docs/operations.md); the counters answer without the database.
    server_.Get("/healthz", [&slot, metrics](const httplib::Request&,
                                             httplib::Response& response) {
      std::optional<std::string> trouble;
      if (!slot.Running()) {
        trouble = "not running";
      } else {
        trouble = metrics->Trouble();
      }
      response.status = trouble ? 503 : 200;
      response.set_content(trouble ? *trouble + "\n" : "ok\n", "text/plain");
    });
    // Port 0 takes any free port; the caller logs the one it got.
    port_ = address.port;
    bool bound = false;
    if (address.port == 0) {
      port_ = server_.bind_to_any_port(address.host);
      bound = port_ > 0;
    } else {
      bound = server_.bind_to_port(address.host, address.port);
    }
    if (!bound) {
      throw std::runtime_error("metrics.listen: cannot listen on " + address.host + ":" +
                               std::to_string(address.port) + " (" + std::strerror(errno) + ")");
    }
  }

  int port() const { return port_; }

  void Start() {
    thread_ = std::jthread([this] {
      if (!server_.listen_after_bind()) logger_->error("metrics server stopped unexpectedly");
      done_.set_value();
    });
  }

  ~MetricsServer() {
    if (!thread_.joinable()) return;
    // stop() does nothing until listen_after_bind() has marked the server
    // running, which a signal right after start can beat: repeat until the
    // thread has left it.
    const std::future<void> done = done_.get_future();
    do {
      server_.stop();
    } while (done.wait_for(std::chrono::milliseconds(10)) == std::future_status::timeout);
  }

 private:
  std::shared_ptr<spdlog::logger> logger_;
  httplib::Server server_;
  int port_ = 0;
  std::promise<void> done_;
  std::jthread thread_;  // last: joined before the server goes away
};

// --- signals ----------------------------------------------------------------

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

// Blocked in every thread (threads inherit the mask, so main blocks them
// first) and read by main from a signalfd: no handler runs in an arbitrary
// thread.
sigset_t DaemonSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  return signals;
}

class Daemon {
 public:
  Daemon(std::string db_path, std::string config_path, Config config,
         std::shared_ptr<spdlog::logger> logger)
      : db_path_(std::move(db_path)),
        config_path_(std::move(config_path)),
        config_(std::move(config)),
        logger_(std::move(logger)),
        metrics_(std::make_shared<outbox::agent::Metrics>()) {}

  int Run() {
    // The database first: a file that is not an outbox database is the most
    // likely start-up failure and gets its own exit status.
    std::unique_ptr<Agent> agent;
    try {
      agent = std::make_unique<Agent>(AgentOptions(config_, db_path_, metrics_, logger_));
    } catch (const std::invalid_argument& e) {
      logger_->critical("{}: {}", config_path_, e.what());
      return kExitUsage;
    } catch (const std::exception& e) {
      logger_->critical("cannot open the database: {}", e.what());
      return kExitFailure;
    }

    std::optional<MetricsServer> server;
    if (!config_.metrics_listen.empty()) {
      const auto address = outbox::agent::ParseListenAddress(config_.metrics_listen);
      try {
        server.emplace(*address, slot_, metrics_, logger_);
      } catch (const std::exception& e) {
        logger_->critical("{}", e.what());
        return kExitFailure;
      }
      logger_->info("metrics listening on {}:{}", address->host, server->port());
    }

    try {
      agent->Start();
    } catch (const std::exception& e) {
      logger_->critical("cannot start the agent: {}", e.what());
      return kExitFailure;
    }
    slot_.Put(std::move(agent));
    if (server) server->Start();
    logger_->info("outboxd started db={} config={} topics={}", db_path_, config_path_,
                  config_.options.topics.size());
    const int status = WaitForSignals();
    logger_->info("outboxd stopped");
    return status;
  }

 private:
  int WaitForSignals() {
    const sigset_t signals = DaemonSignals();
    const int signal_fd = ::signalfd(-1, &signals, SFD_CLOEXEC);
    const int stopped_fd = ::eventfd(0, EFD_CLOEXEC);
    if (signal_fd < 0 || stopped_fd < 0) {
      throw std::system_error(errno, std::generic_category(), "signalfd/eventfd");
    }
    bool stop_failed = false;
    bool grace_cut = false;
    std::unique_ptr<Agent> stopping;  // set once a stop signal came
    std::jthread stopper;             // declared last: joined before the rest goes
    for (;;) {
      pollfd fds[2] = {{signal_fd, POLLIN, 0}, {stopped_fd, POLLIN, 0}};
      if (::poll(fds, stopping ? 2 : 1, -1) < 0) {
        if (errno == EINTR) continue;
        throw std::system_error(errno, std::generic_category(), "poll");
      }
      if ((fds[1].revents & POLLIN) != 0) break;
      signalfd_siginfo info{};
      if (::read(signal_fd, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) continue;
      const int signal = static_cast<int>(info.ssi_signo);
      if (signal == SIGHUP) {
        if (stopping) {
          logger_->info("SIGHUP ignored: stopping");
        } else {
          Reload();
        }
        continue;
      }
      if (!stopping) {
        logger_->info("{} received: stopping (grace {} ms; send it again to stop at once)",
                      SignalName(signal), kStopGrace.count());
        // Out of the slot first: /healthz turns 503 and no handler uses it.
        stopping = slot_.Take();
        // Stop runs on a helper so that main keeps reading signals.
        stopper = std::jthread([&, agent = stopping.get()] {
          try {
            agent->Stop(kStopGrace);
          } catch (const std::exception& e) {
            logger_->error("stop failed: {}", e.what());
            stop_failed = true;
          }
          const std::uint64_t one = 1;
          [[maybe_unused]] const ssize_t written = ::write(stopped_fd, &one, sizeof one);
        });
      } else if (!grace_cut) {
        grace_cut = true;
        logger_->warn("{} received again: aborting sends in flight", SignalName(signal));
        // Agent::Stop may be called again while it runs: the shorter
        // deadline wins.
        stopping->Stop(std::chrono::milliseconds(0));
      }
    }
    stopper.join();  // stop_failed is read below only after this
    ::close(signal_fd);
    ::close(stopped_fd);
    return stop_failed ? kExitFailure : 0;
  }

  // SIGHUP: a new agent with the file's current content. An invalid file
  // keeps the running agent; the database path and the metrics address need
  // a restart.
  void Reload() {
    logger_->info("SIGHUP received: reloading {}", config_path_);
    Config fresh_config;
    std::unique_ptr<Agent> fresh;
    try {
      fresh_config = LoadConfig(config_path_);
      fresh = std::make_unique<Agent>(AgentOptions(fresh_config, db_path_, metrics_, logger_));
    } catch (const std::exception& e) {
      logger_->error("reload failed, keeping the running configuration: {}", e.what());
      return;
    }
    for (const std::string& warning : fresh_config.warnings) {
      logger_->warn("{}: {}", config_path_, warning);
    }
    if (fresh_config.metrics_listen != config_.metrics_listen) {
      logger_->warn("metrics.listen changed to \"{}\"; it takes effect after a restart",
                    fresh_config.metrics_listen);
      fresh_config.metrics_listen = config_.metrics_listen;
    }
    ApplyLogging(*logger_, fresh_config);

    // One agent at a time: the old one's rows go back to pending and the new
    // one picks them up.
    std::unique_ptr<Agent> old = slot_.Take();
    old->Stop(kReloadGrace);
    old.reset();
    try {
      fresh->Start();
      config_ = std::move(fresh_config);
      logger_->info("reloaded topics={}", config_.options.topics.size());
    } catch (const std::exception& e) {
      logger_->error("the reloaded configuration does not start ({}); back to the previous one",
                     e.what());
      fresh = std::make_unique<Agent>(AgentOptions(config_, db_path_, metrics_, logger_));
      fresh->Start();
      ApplyLogging(*logger_, config_);
    }
    slot_.Put(std::move(fresh));
  }

  const std::string db_path_;
  const std::string config_path_;
  Config config_;  // the one running
  std::shared_ptr<spdlog::logger> logger_;
  // Counters survive reloads: Prometheus expects them never to go down.
  std::shared_ptr<outbox::agent::Metrics> metrics_;
  AgentSlot slot_;
};

}  // namespace

int main(int argc, char** argv) {
  // Before any thread exists, so that every thread inherits the mask.
  const sigset_t signals = DaemonSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  CLI::App app{"Deliver an edge-outbox database's messages over HTTP", "outboxd"};
  app.set_version_flag("--version", "outboxd 0.1.0");
  std::string db_path;
  std::string config_path;
  bool check_only = false;
  app.add_option("--db", db_path, "the application's SQLite file")->required();
  app.add_option("--config", config_path, "the JSON configuration file")->required();
  app.add_flag("--check-config", check_only,
               "validate the configuration and exit; creates and changes nothing");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "outboxd: " << e.what() << '\n';
    return kExitUsage;
  }

  Config config;
  try {
    config = LoadConfig(config_path);
  } catch (const std::invalid_argument& e) {
    std::cerr << "outboxd: " << e.what() << '\n';
    return kExitUsage;
  }
  if (check_only) {
    for (const std::string& warning : config.warnings) {
      std::cerr << "outboxd: warning: " << config_path << ": " << warning << '\n';
    }
    std::cout << config_path << ": ok (" << config.options.topics.size() << " topic"
              << (config.options.topics.size() == 1 ? "" : "s") << ")\n";
    return 0;
  }

  const auto logger = MakeLogger();
  ApplyLogging(*logger, config);
  for (const std::string& warning : config.warnings) {
    logger->warn("{}: {}", config_path, warning);
  }
  try {
    Daemon daemon(db_path, config_path, std::move(config), logger);
    return daemon.Run();
  } catch (const std::exception& e) {
    logger->critical("{}", e.what());
    return kExitFailure;
  }
}
