#include "broker_servers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace outbox::transport::testing {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// Debian puts both servers in /usr/sbin, which a normal user's PATH lacks.
std::string FindProgram(const std::string& name) {
  std::string path = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
  path += ":/usr/sbin:/sbin:/usr/local/sbin";
  std::stringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const fs::path candidate = fs::path(dir) / name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  throw std::runtime_error(name + " not found (install the Debian package " + name + ")");
}

std::string ReadFile(const fs::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// Polls `ready` every few ms until it holds or `limit` passes.
template <typename Ready>
bool PollUntil(Ready ready, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a poll interval, not a sync
  }
  return ready();
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

constexpr std::chrono::milliseconds kStartLimit{20'000};

std::string CurrentUser() {
  const passwd* entry = getpwuid(geteuid());
  return entry != nullptr ? entry->pw_name : "root";
}

}  // namespace

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "outbox-broker-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

std::string TempDir::Write(const std::string& name, const std::string& text) const {
  const fs::path file = path_ / name;
  std::ofstream(file) << text;
  return file.string();
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const fs::path& log_file,
                           const std::vector<std::string>& environment) {
  const std::string program = FindProgram(argv.at(0));
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  // Built before fork: the child may only make async-signal-safe calls.
  std::vector<char*> env;
  for (const std::string& entry : environment) env.push_back(const_cast<char*>(entry.c_str()));
  for (char** entry = environ; *entry != nullptr; ++entry) env.push_back(*entry);
  env.push_back(nullptr);
  const int log = open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log < 0) throw std::runtime_error("cannot open " + log_file.string());
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // Only async-signal-safe calls between fork and exec.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    execve(program.c_str(), args.data(), env.data());
    _exit(127);
  }
  close(log);
  if (pid_ < 0) throw std::runtime_error("fork failed");
}

ChildProcess::~ChildProcess() { Stop(); }

bool ChildProcess::Running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

int ChildProcess::Wait() {
  if (pid_ <= 0) return -1;
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void ChildProcess::Stop(std::chrono::milliseconds grace) {
  if (!Running()) return;
  kill(pid_, SIGTERM);
  if (!PollUntil([&] { return !Running(); }, grace)) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = 0;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd);
    throw std::runtime_error("cannot bind 127.0.0.1:0");
  }
  close(fd);
  return ntohs(address.sin_port);
}

// --- nats-server ------------------------------------------------------------

NatsServer::NatsServer(std::string config) : config_(std::move(config)) { Start(); }

NatsServer::~NatsServer() { Stop(); }

void NatsServer::Stop() {
  if (process_) process_->Stop();
  process_.reset();
}

void NatsServer::Start() {
  // Port -1: nats-server picks a free one and writes it to a ports file; a
  // restart reuses the port it got the first time.
  const fs::path ports_dir = directory_.path() / "ports";
  fs::remove_all(ports_dir);
  fs::create_directories(ports_dir);
  const std::string config_file = directory_.Write(
      "nats.conf", "listen: \"127.0.0.1:" + std::to_string(port_ == 0 ? -1 : port_) +
                       "\"\n"
                       "jetstream {\n  store_dir: \"" +
                       (directory_.path() / "store").string() + "\"\n}\n" + config_);
  process_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{"nats-server", "-c", config_file, "--ports_file_dir",
                               ports_dir.string()},
      directory_.path() / "nats.log");
  const std::regex client_url(R"re("nats":\["[a-z]+://[^"]*:(\d+)")re");
  int found = 0;
  const bool ready = PollUntil(
      [&] {
        if (!process_->Running()) return true;
        for (const auto& entry : fs::directory_iterator(ports_dir)) {
          std::smatch match;
          const std::string text = ReadFile(entry.path());
          if (std::regex_search(text, match, client_url)) found = std::stoi(match[1]);
        }
        return found != 0;
      },
      kStartLimit);
  if (!ready || found == 0) {
    throw std::runtime_error("nats-server did not start:\n" + Log());
  }
  port_ = found;
}

std::string NatsServer::Url(const std::string& subject, bool tls) const {
  return std::string(tls ? "tls" : "nats") + "://127.0.0.1:" + std::to_string(port_) + "/" +
         subject;
}

std::string NatsServer::Log() const { return ReadFile(directory_.path() / "nats.log"); }

// --- mosquitto --------------------------------------------------------------

MosquittoServer::MosquittoServer(std::string config) : config_(std::move(config)) { Start(); }

MosquittoServer::~MosquittoServer() { Stop(); }

void MosquittoServer::Stop() {
  if (process_) process_->Stop();
  process_.reset();
}

void MosquittoServer::Start() {
  // mosquitto cannot pick its own port: take a free one, and another if
  // some process took it between the check and mosquitto's bind. A restart
  // keeps the port.
  const bool keep_port = port_ != 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (!keep_port) port_ = FreeLoopbackPort();
    if (TryStart()) return;
  }
  throw std::runtime_error("mosquitto did not start:\n" + Log());
}

bool MosquittoServer::TryStart() {
  const std::string config_file = directory_.Write(
      "mosquitto.conf", "listener " + std::to_string(port_) +
                            " 127.0.0.1\n"
                            "persistence false\n"
                            // Run as root, mosquitto would switch to user
                            // "mosquitto", who cannot read the test's files.
                            "user " + CurrentUser() + "\n"
                            "log_dest stderr\n"
                            "log_type error\nlog_type warning\nlog_type notice\n"
                            "log_type information\n" +
                            config_);
  process_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{"mosquitto", "-c", config_file},
      directory_.path() / "mosquitto.log");
  const int port = port_;
  PollUntil([&] { return !process_->Running() || AcceptsConnections(port); }, kStartLimit);
  if (process_->Running() && AcceptsConnections(port)) return true;
  process_->Stop();
  process_.reset();
  return false;
}

std::string MosquittoServer::Url(const std::string& topic) const {
  return "mqtt://127.0.0.1:" + std::to_string(port_) + "/" + topic;
}

std::string MosquittoServer::Log() const {
  return ReadFile(directory_.path() / "mosquitto.log");
}

}  // namespace outbox::transport::testing
