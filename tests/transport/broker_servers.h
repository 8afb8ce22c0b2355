// Real message brokers for the sink tests: Debian's nats-server (JetStream
// on) and mosquitto, each started by the fixture on a 127.0.0.1 port chosen at
// run time, with its own temporary directory, and stopped (and waited for) by
// the destructor. Readiness is polled with a deadline, never slept for.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace outbox::transport::testing {

// A directory removed with everything in it at the end.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  // Writes `text` to path()/name and returns the file's path.
  std::string Write(const std::string& name, const std::string& text) const;

 private:
  std::filesystem::path path_;
};

// A server program run as a child process, its output in a log file. The
// child gets SIGKILL if the test process dies first. `environment` ("NAME=value")
// is added to the test process's own.
class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, const std::filesystem::path& log_file,
               const std::vector<std::string>& environment = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // False once the child has exited (and been reaped).
  bool Running();
  // SIGTERM, then SIGKILL after `grace`; returns when the child is reaped.
  void Stop(std::chrono::milliseconds grace = std::chrono::seconds(10));
  // Waits for the child to exit by itself; its exit status (-1 when a
  // signal ended it).
  int Wait();

 private:
  pid_t pid_ = -1;
};

// A port on 127.0.0.1 that was free a moment ago (for servers that cannot
// pick their own; the caller retries if another process took it meanwhile).
int FreeLoopbackPort();

// nats-server with JetStream on. `config` is added to the generated
// configuration file (authorization, TLS, limits).
class NatsServer {
 public:
  explicit NatsServer(std::string config = "");
  ~NatsServer();
  NatsServer(const NatsServer&) = delete;
  NatsServer& operator=(const NatsServer&) = delete;

  // Stops the server; Start() brings it back on the same port with the same
  // JetStream store (an outage).
  void Stop();
  void Start();

  int port() const { return port_; }
  // "nats://127.0.0.1:<port>/<subject>" ("tls://" with `tls`).
  std::string Url(const std::string& subject, bool tls = false) const;
  const std::filesystem::path& directory() const { return directory_.path(); }
  std::string Log() const;

 private:
  TempDir directory_;
  std::string config_;
  int port_ = 0;  // 0 until the first start has picked one
  std::unique_ptr<ChildProcess> process_;
};

// mosquitto with a generated configuration file. `config` is added to it
// (allow_anonymous, password_file, acl_file, max_packet_size...).
class MosquittoServer {
 public:
  explicit MosquittoServer(std::string config = "allow_anonymous true\n");
  ~MosquittoServer();
  MosquittoServer(const MosquittoServer&) = delete;
  MosquittoServer& operator=(const MosquittoServer&) = delete;

  void Stop();
  void Start();

  int port() const { return port_; }
  // "mqtt://127.0.0.1:<port>/<topic>".
  std::string Url(const std::string& topic) const;
  const TempDir& directory() const { return directory_; }
  std::string Log() const;

 private:
  bool TryStart();

  TempDir directory_;
  std::string config_;
  int port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace outbox::transport::testing
