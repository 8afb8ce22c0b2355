#include "rabbit_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace outbox::transport::testing {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

constexpr char kServer[] = "/usr/lib/rabbitmq/bin/rabbitmq-server";
constexpr char kCtl[] = "/usr/lib/rabbitmq/bin/rabbitmqctl";
constexpr std::chrono::seconds kStartLimit{90};

std::string ReadFile(const fs::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

bool AcceptsConnections(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  close(fd);
  return ok;
}

template <typename Ready>
bool PollUntil(Ready ready, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a poll interval, not a sync
  }
  return ready();
}

}  // namespace

RabbitServer::RabbitServer(bool with_tls)
    : pki_(with_tls ? std::make_unique<TestPki>() : nullptr),
      node_("outbox" + std::to_string(getpid()) + "@localhost") {
  const fs::path dir = directory_.path();
  // No plugins: the management plugin alone doubles the start time.
  directory_.Write("enabled_plugins", "[].\n");
  for (int attempt = 0; attempt < 3; ++attempt) {
    port_ = FreeLoopbackPort();
    if (pki_) tls_port_ = FreeLoopbackPort();
    dist_port_ = FreeLoopbackPort();
    epmd_port_ = FreeLoopbackPort();
    epmd_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{"epmd", "-port", std::to_string(epmd_port_), "-address",
                                 "127.0.0.1"},
        dir / "epmd.log");
    if (PollUntil([&] { return !epmd_->Running() || AcceptsConnections(epmd_port_); },
                  std::chrono::seconds(10)) &&
        epmd_->Running() && TryStart()) {
      return;
    }
    if (broker_) broker_->Stop();
    epmd_->Stop();
  }
  throw std::runtime_error("rabbitmq-server did not start:\n" + Log());
}

RabbitServer::~RabbitServer() {
  Stop();
  if (epmd_) epmd_->Stop();
}

void RabbitServer::Stop() {
  // SIGTERM is the broker's orderly shutdown (persistent messages on disk).
  if (broker_) broker_->Stop(std::chrono::seconds(60));
  broker_.reset();
}

void RabbitServer::Start() {
  if (!TryStart()) throw std::runtime_error("rabbitmq-server did not start again:\n" + Log());
}

std::vector<std::string> RabbitServer::Environment() const {
  const std::string dir = directory_.path().string();
  return {"HOME=" + dir,
          "RABBITMQ_NODENAME=" + node_,
          "RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
          "RABBITMQ_NODE_PORT=" + std::to_string(port_),
          "RABBITMQ_DIST_PORT=" + std::to_string(dist_port_),
          "ERL_EPMD_PORT=" + std::to_string(epmd_port_),
          "ERL_EPMD_ADDRESS=127.0.0.1",
          "RABBITMQ_MNESIA_BASE=" + dir + "/mnesia",
          "RABBITMQ_LOG_BASE=" + dir + "/log",
          "RABBITMQ_LOGS=-",
          "RABBITMQ_CONFIG_FILE=" + dir + "/rabbitmq.conf",
          "RABBITMQ_ADVANCED_CONFIG_FILE=" + dir + "/advanced.config",
          "RABBITMQ_CONF_ENV_FILE=" + dir + "/rabbitmq-env.conf",
          "RABBITMQ_ENABLED_PLUGINS_FILE=" + dir + "/enabled_plugins",
          "RABBITMQ_PID_FILE=" + dir + "/rabbitmq.pid",
          "ERL_CRASH_DUMP=" + dir + "/erl_crash.dump",
          // The script then execs the Erlang VM instead of waiting on it in
          // a shell: the child's pid is the broker's, and so is SIGTERM.
          "RUNNING_UNDER_SYSTEMD=true"};
}

bool RabbitServer::TryStart() {
  std::string config = "listeners.tcp.default = 127.0.0.1:" + std::to_string(port_) +
                       "\n"
                       // The tests set their own disk alarm with rabbitmqctl.
                       "disk_free_limit.absolute = 1MB\n"
                       "vm_memory_high_watermark.relative = 0.9\n";
  if (pki_) {
    config += "listeners.ssl.default = 127.0.0.1:" + std::to_string(tls_port_) +
              "\nssl_options.cacertfile = " + pki_->ca().cert_file +
              "\nssl_options.certfile = " + pki_->server().cert_file +
              "\nssl_options.keyfile = " + pki_->server().key_file +
              "\nssl_options.verify = verify_peer\nssl_options.fail_if_no_peer_cert = true\n";
  }
  directory_.Write("rabbitmq.conf", config);
  // The log grows over restarts: only what this start writes counts.
  const std::size_t seen = Log().size();
  const auto start = Clock::now();
  broker_ = std::make_unique<ChildProcess>(std::vector<std::string>{kServer},
                                           directory_.path() / "rabbitmq.log", Environment());
  const bool ready = PollUntil(
      [&] {
        if (!broker_->Running()) return true;
        return AcceptsConnections(port_) && (tls_port_ == 0 || AcceptsConnections(tls_port_)) &&
               Log().find("Server startup complete", seen) != std::string::npos;
      },
      kStartLimit);
  start_time_ = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  return ready && broker_->Running();
}

std::string RabbitServer::Url() const {
  return "amqp://127.0.0.1:" + std::to_string(port_) + "/";
}

std::string RabbitServer::Ctl(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {kCtl, "-n", node_};
  argv.insert(argv.end(), args.begin(), args.end());
  const fs::path output = directory_.path() / "rabbitmqctl.out";
  fs::remove(output);
  ChildProcess ctl(argv, output, Environment());
  const int status = ctl.Wait();
  const std::string text = ReadFile(output);
  if (status != 0) throw std::runtime_error("rabbitmqctl failed:\n" + text);
  return text;
}

std::string RabbitServer::Log() const { return ReadFile(directory_.path() / "rabbitmq.log"); }

}  // namespace outbox::transport::testing
