// A deliberately unreliable HTTP/1.1 receiver on 127.0.0.1, port 0, written
// on raw sockets so that it can do what a well-behaved server library will
// not: reset a connection in the middle of its response, never answer, or
// refuse connections for a while (its port is closed and later bound again).
//
// Every request is read completely (Content-Length framing, keep-alive), then
// a test-supplied function picks its fate. The server counts, per
// Idempotency-Key, how many requests arrived and how many it accepted
// (answered 2xx, or meant to and cut the connection mid-response): an
// accepted request is one a real receiver would have processed, so accepted
// minus distinct keys is the number of duplicates the receiver saw.
//
// Thread-safe. Owns its threads (an acceptor and one per connection) and
// joins them in Stop() or the destructor; a hanging response ends then.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace outbox::reliability::testing {

struct FaultRequest {
  std::string method;
  std::string path;
  std::map<std::string, std::string> headers;  // names lowercased
  std::string body;

  // The value of header `name` (lowercase), "" if absent.
  std::string Header(const std::string& name) const;
};

enum class Fault {
  kOk,           // 200, empty body
  kServerError,  // 500 with a short body
  kUnavailable,  // 503
  kTooMany,      // 429 with Retry-After: 1
  kReset,        // half a status line, then RST (accepted, never acknowledged)
  kHang,         // no answer until the client gives up or the server stops
  kEcho,         // 500 whose body repeats every request header (secret leak tests)
  kTooLarge,     // 413 Content Too Large (a message failure)
};

std::string_view FaultName(Fault fault);

class FaultServer {
 public:
  using Decide = std::function<Fault(const FaultRequest&)>;

  explicit FaultServer(Decide decide);
  ~FaultServer();
  FaultServer(const FaultServer&) = delete;
  FaultServer& operator=(const FaultServer&) = delete;

  // Binds 127.0.0.1:0 and starts accepting. Throws std::runtime_error if the
  // socket cannot be set up.
  void Start();
  // Closes every connection, ends hanging responses and joins all threads.
  void Stop();

  // Down: the listening socket is closed, so connecting is refused. Up: the
  // same port is bound again (retrying briefly if the kernel still holds it).
  void SetDown(bool down);

  int port() const { return port_; }
  std::string Url(const std::string& path) const;

  struct KeyCount {
    int received = 0;  // complete requests carrying this key
    int accepted = 0;  // of which answered 2xx or reset mid-response
    int acknowledged = 0;  // of which a 2xx went out completely
  };
  std::map<std::string, KeyCount> Counts() const;
  // Requests per fault kind.
  std::map<Fault, int> FaultCounts() const;
  // Every request received so far (header maps and bodies), for inspection.
  std::vector<FaultRequest> Requests() const;
  // Appended to the body of every kEcho answer (say, a token a careless
  // receiver quotes back on its own).
  void SetEchoSuffix(std::string suffix);

 private:
  struct Shared;
  struct Connection {
    std::jthread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  void AcceptLoop(std::stop_token stop);
  void Serve(int fd, std::stop_token stop);
  bool WaitReadable(int fd, int generation);
  bool ReadMore(int fd, int generation, std::string& buffer);
  // Binds port_ (0 the first time) and listens; sets listen_fd_.
  bool Listen();

  Decide decide_;
  std::unique_ptr<Shared> shared_;
  int port_ = 0;            // fixed once Start() returns
  int wake_[2] = {-1, -1};  // a pipe: written once by Stop() to end every poll()
  int listen_fd_ = -1;      // owned by the acceptor thread after Start()

  mutable std::mutex mutex_;
  bool down_ = false;                        // guarded by mutex_
  std::list<Connection> connections_;        // guarded by mutex_
  std::map<std::string, KeyCount> counts_;      // guarded by mutex_
  std::map<Fault, int> faults_;                 // guarded by mutex_
  std::vector<FaultRequest> requests_;          // guarded by mutex_
  std::string echo_suffix_;                     // guarded by mutex_
  std::atomic<bool> stopping_{false};
  std::jthread acceptor_;
};

}  // namespace outbox::reliability::testing
