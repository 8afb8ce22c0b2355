// A small HTTP/1.1 server for outboxd's listeners (/metrics and /healthz;
// the admin API). Internal to edge-outbox. It refuses what it does not
// serve, so that a local user or a peer on the network cannot grow its
// memory, hold its descriptors or starve a health probe:
//
//   - one thread, owned by the Server (joined by Stop() and the destructor),
//     polling non-blocking sockets; handlers run on that thread, one at a
//     time, so they must be quick (a /healthz probe waits behind them);
//   - at most `max_connections` open; at the cap, the longest-idle or the
//     oldest incomplete connection is closed to admit the new one;
//   - on TCP, a connection is accepted only once its first bytes have
//     arrived (TCP_DEFER_ACCEPT, about 1 s for one that sends nothing), so
//     silent connections hold no descriptor and cannot push out a request
//     sent a moment after its connect;
//   - a request head (request line and headers) of at most
//     `max_header_bytes` and `max_header_count` headers, received whole
//     within `request_timeout` of its first byte (one deadline for the whole
//     request, body included, not one per read), else 431 / 408;
//   - a path that no route serves is 404, a method the path does not take is
//     405 (with Allow), both answered without reading a body, and the
//     connection is closed when one was sent;
//   - a body is read only for a route that declares `max_body_bytes` > 0,
//     by Content-Length or chunked, never beyond that bound (413), never
//     decompressed (Content-Encoding other than identity is 415);
//   - keep-alive for at most `max_requests_per_connection` requests, idle at
//     most `keep_alive_timeout` between them.
//
// Adding a route: put a Route {method, path, prefix?, max_body_bytes,
// handler} in the list given to the constructor. A GET route also answers
// HEAD (same headers, no body). Routes are matched in order: exact paths,
// or with `prefix` every path starting with `path`.
//
// A second listener (the admin API beside /metrics) is a second Server with
// its own routes, options and address, on its own thread.
//
// Thread-safety: construct, Start() and Stop() from one thread; handlers are
// called on the server's thread only. A handler must not throw (one that
// does gets a 500 and the error callback is told).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/listen_address.h"

namespace outbox::util::http {

// The peer of a Unix-socket connection, from SO_PEERCRED at accept.
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

struct Request {
  std::string method;  // as sent, e.g. "GET" (HEAD is given to GET routes as "HEAD")
  std::string path;    // the target up to '?', not percent-decoded
  std::string query;   // after '?', without it, not decoded; "" if none
  // In the order sent; names lower-cased, values without surrounding blanks.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // empty unless the route declares max_body_bytes
  // Set for connections on a Unix socket, nullopt on TCP.
  std::optional<PeerCredentials> peer;
  // The TCP peer as "127.0.0.1:54321" or "[::1]:54321"; "" on a Unix socket.
  std::string remote_address;

  // The first header of that name (case-insensitive), or nullopt.
  std::optional<std::string_view> Header(std::string_view name) const;
};

struct Response {
  int status = 200;
  // Content-Length, Date-less; Connection is set by the server. Add
  // Content-Type and anything else here.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // A response with a Content-Type header.
  static Response Text(int status, std::string body,
                       std::string content_type = "text/plain; charset=utf-8");
};

using Handler = std::function<Response(const Request&)>;

struct Route {
  std::string method;  // "GET", "POST", ... (exact, upper case)
  std::string path;    // "/metrics"; with prefix, "/admin/api/"
  bool prefix = false;
  // 0: the route takes no body (one sent gets 413 unread, and the
  // connection closes). Else the largest body read, in bytes.
  std::size_t max_body_bytes = 0;
  Handler handler;
};

struct ServerOptions {
  // Open connections at most; at the cap a new one closes the longest-idle
  // or oldest incomplete one. Must be >= 1.
  std::size_t max_connections = 32;
  // Request line plus headers, in bytes (431 beyond). Must be >= 256.
  std::size_t max_header_bytes = 8 * 1024;
  // Header lines per request (431 beyond). Must be >= 1.
  std::size_t max_header_count = 32;
  // From the request's first byte (or from accept) to its last: 408 after.
  std::chrono::milliseconds request_timeout{5000};
  // Idle time allowed between requests on a kept-alive connection.
  std::chrono::milliseconds keep_alive_timeout{5000};
  // Time allowed to write one response out to the peer.
  std::chrono::milliseconds write_timeout{10000};
  // Requests served per connection before it is closed.
  std::size_t max_requests_per_connection = 100;
};

// Where to listen: TCP (host:port; port 0 = any free port) or a Unix socket.
struct ListenOn {
  std::optional<ListenAddress> tcp;
  // A Unix socket path: created by bind (never through an existing link or
  // file; a stale socket left by a dead server is replaced), then given
  // `unix_mode` before anyone can connect. The directory should not be
  // writable by others. Removed by the server's destructor.
  std::string unix_path;
  mode_t unix_mode = 0660;
};

// Reports problems the server cannot answer with a status (a handler that
// threw, accept failing): one line, no request data beyond the path.
using ErrorLog = std::function<void(std::string_view)>;

class Server {
 public:
  // Validates the options and routes (std::invalid_argument naming the
  // field) and binds at once, so a taken port fails the caller, not a
  // thread: std::runtime_error naming the address and the reason.
  Server(const ListenOn& where, std::vector<Route> routes, ServerOptions options = {},
         ErrorLog error_log = {});
  // Stops and joins the thread; closes every connection.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The bound TCP port (the kernel's choice when asked for 0); 0 for Unix.
  int port() const;
  // Starts serving on the server's own thread. Once only.
  void Start();
  // Stops serving and joins the thread; idempotent.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace outbox::util::http
