#include "nginx_sink.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <vector>

extern char** environ;

namespace outbox::bench {
namespace {

constexpr const char* kCandidates[] = {"/usr/sbin/nginx", "/usr/bin/nginx",
                                       "/usr/local/sbin/nginx"};

// A port the kernel just handed out on 127.0.0.1. nginx cannot listen on
// port 0 and report the port, so there is a window in which another process
// could take it; Start then fails with nginx's own error in its log.
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("nginx sink: socket failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    throw std::runtime_error("nginx sink: cannot find a free port");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

bool Answers(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

std::unique_ptr<NginxSink> NginxSink::Start(const std::string& dir, std::string& why) {
  std::string binary;
  for (const char* candidate : kCandidates) {
    if (::access(candidate, X_OK) == 0) {
      binary = candidate;
      break;
    }
  }
  if (binary.empty()) {
    why = "nginx not installed (apt-get install nginx-light)";
    return nullptr;
  }
  const int port = FreePort();
  const std::string config = dir + "/nginx.conf";
  {
    std::ofstream out(config);
    // Every path under `dir`: the packaged defaults (/var/log/nginx, /run)
    // may not be writable, and a second instance must not share them.
    out << "daemon off;\nmaster_process off;\nworker_processes 1;\n"
        << "pid " << dir << "/nginx.pid;\nerror_log " << dir << "/nginx-error.log warn;\n"
        << "events { worker_connections 256; }\n"
        << "http {\n  access_log off;\n"
        << "  client_body_temp_path " << dir << "/nginx-body;\n"
        << "  proxy_temp_path " << dir << "/nginx-proxy;\n"
        << "  fastcgi_temp_path " << dir << "/nginx-fastcgi;\n"
        << "  uwsgi_temp_path " << dir << "/nginx-uwsgi;\n"
        << "  scgi_temp_path " << dir << "/nginx-scgi;\n"
        // One kept-alive connection per sender carries a whole run.
        << "  keepalive_requests 1000000000;\n  keepalive_timeout 600s;\n"
        << "  server {\n    listen 127.0.0.1:" << port << ";\n"
        << "    location / { return 204; }\n  }\n}\n";
  }
  const std::string log = dir + "/nginx-stderr.log";
  std::vector<std::string> args = {binary, "-p", dir, "-e", dir + "/nginx-error.log", "-c", config};
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("nginx sink: cannot start " + binary);
  std::unique_ptr<NginxSink> sink(new NginxSink(pid, port));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!Answers(port)) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) {
      sink->pid_ = 0;
      throw std::runtime_error("nginx sink: nginx exited at start; see " + log + " and " + dir +
                               "/nginx-error.log");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("nginx sink: nginx did not listen within 5 s");
    }
    // Polls a child's start-up; no result depends on this pause.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return sink;
}

NginxSink::~NginxSink() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGQUIT);  // graceful: finishes kept-alive connections
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (::waitpid(pid_, nullptr, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string NginxSink::Url() const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/events";
}

}  // namespace outbox::bench
