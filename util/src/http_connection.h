// One accepted connection of the HTTP server: reads a request within its
// limits, routes it, reads a body only for a route that declares one, calls
// the handler and writes the response, all on non-blocking reads and writes
// driven by the server's poll loop. Internal to outbox_util; used on the
// server's thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "http_head.h"
#include "util/http_server.h"

namespace outbox::util::http {

using Clock = std::chrono::steady_clock;

// What a connection shares with the server: its routes, limits and log.
struct ServerContext {
  std::vector<Route> routes;
  ServerOptions options;
  ErrorLog error_log;
};

class Connection {
 public:
  // Takes ownership of `fd` (closed by the destructor).
  Connection(int fd, std::optional<PeerCredentials> peer, std::string remote_address,
             const ServerContext& context, Clock::time_point now);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  int fd() const { return fd_; }
  // POLLIN while reading a request, POLLOUT while writing a response.
  short Events() const;
  // When the connection must have made progress (see ServerOptions).
  Clock::time_point deadline() const { return deadline_; }
  // Eviction order at the connection cap: connections not writing a
  // response go first, the one waiting longest (idle or incomplete) first.
  bool writing() const { return state_ == State::kWriting; }
  Clock::time_point since() const { return since_; }

  // Each returns false once the connection is to be closed.
  bool OnReadable(Clock::time_point now);
  bool OnWritable(Clock::time_point now);
  // Past the deadline: a 408 for a request under way (best effort), then false.
  bool OnDeadline(Clock::time_point now);

 private:
  enum class State { kIdle, kHead, kBody, kWriting };

  bool Process(Clock::time_point now);
  void StartRequest(RequestHead head, Clock::time_point now);
  // Checks the body's framing; false with a refusal queued.
  bool ExpectBody(const Route& route, Clock::time_point now);
  bool TakeBody(Clock::time_point now);
  const Route* FindRoute(const RequestHead& head, std::string& allow) const;
  void Answer(Response response, Clock::time_point now);
  void Refuse(int status, Clock::time_point now);
  bool Flush(Clock::time_point now);

  const int fd_;
  const std::optional<PeerCredentials> peer_;
  const std::string remote_address_;
  const ServerContext& context_;
  State state_ = State::kIdle;
  Clock::time_point since_;
  Clock::time_point deadline_;
  std::size_t served_ = 0;
  std::string in_;   // received, not yet consumed
  std::string out_;  // the response being written
  std::size_t out_sent_ = 0;
  bool close_after_write_ = false;
  // The request whose body is being read.
  std::optional<RequestHead> head_;
  const Route* route_ = nullptr;
  bool chunked_ = false;
  std::size_t content_length_ = 0;
  bool head_only_ = false;
};

}  // namespace outbox::util::http
