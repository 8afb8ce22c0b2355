// Debian's rabbitmq-server for the AMQP sink tests, started by the fixture on
// 127.0.0.1 ports chosen at run time and stopped (and waited for) by the
// destructor, with nothing left running.
//
// /usr/sbin/rabbitmq-server switches to the rabbitmq user and refuses
// others, so this runs /usr/lib/rabbitmq/bin/rabbitmq-server directly with
// its own node name, ports, data and log directories, HOME (the Erlang
// cookie) and its own epmd on its own port (an epmd the broker started
// would outlive it). Starting takes seconds: one per test binary.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "broker_servers.h"
#include "test_pki.h"

namespace outbox::transport::testing {

class RabbitServer {
 public:
  // `with_tls` adds a TLS listener (tls_port()) with a server certificate
  // of pki() that requires a client certificate issued by pki()'s CA.
  explicit RabbitServer(bool with_tls = false);
  ~RabbitServer();
  RabbitServer(const RabbitServer&) = delete;
  RabbitServer& operator=(const RabbitServer&) = delete;

  // Stops the broker; Start() brings it back on the same port with the same
  // data (durable queues and persistent messages survive: an outage).
  void Stop();
  void Start();

  int port() const { return port_; }
  int tls_port() const { return tls_port_; }
  const TestPki& pki() const { return *pki_; }
  // "amqp://127.0.0.1:<port>/" (the default virtual host).
  std::string Url() const;
  // rabbitmqctl against this node (e.g. {"set_disk_free_limit", "1MB"}); its
  // output. Throws std::runtime_error with the output when it fails.
  std::string Ctl(const std::vector<std::string>& args) const;
  // How long the last Start() took until the broker accepted connections.
  std::chrono::milliseconds start_time() const { return start_time_; }
  std::string Log() const;

 private:
  bool TryStart();
  std::vector<std::string> Environment() const;

  TempDir directory_;
  std::unique_ptr<TestPki> pki_;  // with TLS; outlives the broker reading it
  std::string node_;
  int port_ = 0;
  int tls_port_ = 0;
  int dist_port_ = 0;
  int epmd_port_ = 0;
  std::chrono::milliseconds start_time_{0};
  std::unique_ptr<ChildProcess> epmd_;
  std::unique_ptr<ChildProcess> broker_;
};

}  // namespace outbox::transport::testing
