#include "util/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "http_connection.h"
#include "http_head.h"
#include "http_listen.h"

namespace outbox::util::http {
namespace {

void Validate(const ServerOptions& options, const std::vector<Route>& routes) {
  const auto refuse = [](const std::string& what) {
    throw std::invalid_argument("http server: " + what);
  };
  if (options.max_connections < 1) refuse("max_connections must be at least 1");
  if (options.max_header_bytes < 256) refuse("max_header_bytes must be at least 256");
  if (options.max_header_count < 1) refuse("max_header_count must be at least 1");
  if (options.max_requests_per_connection < 1)
    refuse("max_requests_per_connection must be at least 1");
  if (options.request_timeout.count() <= 0 || options.keep_alive_timeout.count() <= 0 ||
      options.write_timeout.count() <= 0) {
    refuse("timeouts must be positive");
  }
  for (const Route& route : routes) {
    if (route.method.empty() || route.path.empty() || route.path.front() != '/' || !route.handler) {
      refuse("a route needs a method, a path starting with '/' and a handler (" + route.method +
             " " + route.path + ")");
    }
  }
}

// "127.0.0.1:54321" or "[::1]:54321".
std::string Format(const sockaddr_storage& address) {
  char host[INET6_ADDRSTRLEN] = "";
  if (address.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(v6.sin6_port));
  }
  const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
  ::inet_ntop(AF_INET, &v4.sin_addr, host, sizeof(host));
  return std::string(host) + ":" + std::to_string(ntohs(v4.sin_port));
}

std::optional<PeerCredentials> PeerOf(int fd) {
  ucred credentials{};
  socklen_t length = sizeof(credentials);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return std::nullopt;
  return PeerCredentials{credentials.pid, credentials.uid, credentials.gid};
}

}  // namespace

std::optional<std::string_view> Request::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key.size() == name.size() &&
        std::equal(key.begin(), key.end(), name.begin(), [](char a, char b) {
          return a == std::tolower(static_cast<unsigned char>(b));
        })) {
      return value;
    }
  }
  return std::nullopt;
}

Response Response::Text(int status, std::string body, std::string content_type) {
  Response response;
  response.status = status;
  response.headers.emplace_back("Content-Type", std::move(content_type));
  response.body = std::move(body);
  return response;
}

struct Server::Impl {
  ServerContext context;
  int listen_fd = -1;
  bool unix_socket = false;
  std::string unix_path;
  int port = 0;
  int wake_fd = -1;
  // Out of descriptors: accepting pauses until then instead of spinning.
  Clock::time_point accept_paused_until;
  Clock::time_point next_accept_error_log;
  std::vector<std::unique_ptr<Connection>> connections;  // the server thread's only
  std::jthread thread;

  void Run();
  void Serve(const std::vector<pollfd>& polled, Clock::time_point now);
  void Accept(Clock::time_point now);
  void EvictOne(Clock::time_point now);
};

Server::Server(const ListenOn& where, std::vector<Route> routes, ServerOptions options,
               ErrorLog error_log)
    : impl_(std::make_unique<Impl>()) {
  Validate(options, routes);
  if (where.tcp.has_value() == !where.unix_path.empty()) {
    throw std::invalid_argument("http server: listen on either a TCP address or a Unix socket");
  }
  impl_->context = ServerContext{std::move(routes), options, std::move(error_log)};
  impl_->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl_->wake_fd < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  try {
    if (where.tcp) {
      impl_->listen_fd = ListenTcp(*where.tcp, impl_->port);
    } else {
      impl_->listen_fd = ListenUnix(where.unix_path, where.unix_mode);
      impl_->unix_socket = true;
      impl_->unix_path = where.unix_path;
    }
  } catch (...) {
    ::close(impl_->wake_fd);
    throw;
  }
}

Server::~Server() {
  Stop();
  impl_->connections.clear();
  ::close(impl_->listen_fd);
  if (impl_->unix_socket) ::unlink(impl_->unix_path.c_str());
  ::close(impl_->wake_fd);
}

int Server::port() const { return impl_->port; }

void Server::Start() {
  if (impl_->thread.joinable()) throw std::logic_error("http server: started twice");
  impl_->thread = std::jthread([impl = impl_.get()] { impl->Run(); });
}

void Server::Stop() {
  if (!impl_->thread.joinable()) return;
  const std::uint64_t one = 1;
  // An eventfd write fails only when the counter would overflow: the
  // thread is woken either way.
  if (::write(impl_->wake_fd, &one, sizeof(one)) < 0) {
  }
  impl_->thread.join();
}

void Server::Impl::Run() {
  std::vector<pollfd> polled;
  for (;;) {
    const bool accepting = Clock::now() >= accept_paused_until;
    polled.assign(
        {{wake_fd, POLLIN, 0}, {listen_fd, static_cast<short>(accepting ? POLLIN : 0), 0}});
    Clock::time_point next = Clock::now() + std::chrono::seconds(60);
    if (!accepting) next = accept_paused_until;
    for (const auto& connection : connections) {
      polled.push_back({connection->fd(), connection->Events(), 0});
      next = std::min(next, connection->deadline());
    }
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now());
    const int ready = ::poll(polled.data(), polled.size(),
                             static_cast<int>(std::max<std::int64_t>(0, wait.count())));
    if (ready < 0 && errno != EINTR) {
      if (context.error_log) context.error_log(std::string("http: poll: ") + std::strerror(errno));
      return;
    }
    if (polled[0].revents != 0) return;  // Stop()
    const Clock::time_point now = Clock::now();
    Serve(polled, now);
    if (polled[1].revents != 0) Accept(now);
  }
}

// Reads, writes and expires the connections polled (those accepted since
// come next round).
void Server::Impl::Serve(const std::vector<pollfd>& polled, Clock::time_point now) {
  std::vector<std::unique_ptr<Connection>> kept;
  kept.reserve(connections.size());
  for (std::size_t i = 0; i < connections.size(); ++i) {
    Connection& connection = *connections[i];
    const short events = polled[i + 2].revents;
    bool open = true;
    if (events & (POLLERR | POLLNVAL)) {
      open = false;
    } else if (events & POLLOUT) {
      open = connection.OnWritable(now);
    } else if (events & (POLLIN | POLLHUP)) {
      open = connection.OnReadable(now);
    }
    // Checked whatever arrived: the deadline bounds the whole request, so a
    // peer sending a byte at a time gains nothing.
    if (open && now >= connection.deadline()) open = connection.OnDeadline(now);
    if (open) kept.push_back(std::move(connections[i]));
  }
  connections = std::move(kept);
}

// Takes at most half the cap per round, so a connection just accepted is
// read before newer ones can push it out.
void Server::Impl::Accept(Clock::time_point now) {
  const std::size_t cap = context.options.max_connections;
  for (std::size_t taken = 0; taken < std::max<std::size_t>(1, cap / 2); ++taken) {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&address), &length,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE)
        accept_paused_until = now + std::chrono::milliseconds(100);
      const bool expected =
          errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED;
      if (!expected && context.error_log && now >= next_accept_error_log) {
        context.error_log(std::string("http: accept: ") + std::strerror(errno));
        next_accept_error_log = now + std::chrono::minutes(1);  // not ten lines a second
      }
      return;
    }
    if (connections.size() >= cap) EvictOne(now);
    std::optional<PeerCredentials> peer;
    if (unix_socket) peer = PeerOf(fd);
    connections.push_back(
        std::make_unique<Connection>(fd, peer, unix_socket ? "" : Format(address), context, now));
  }
}

// The longest-idle or oldest incomplete connection; one writing a response
// only when all are. Each candidate first reads what is waiting for it: a
// request that has arrived in full is answered, never pushed out, however
// fast others connect (a /healthz probe sends its request right after its
// connect, possibly just after this round's poll).
void Server::Impl::EvictOne(Clock::time_point now) {
  std::vector<std::unique_ptr<Connection>> kept;
  kept.reserve(connections.size());
  for (auto& connection : connections) {
    if (connection->writing() || connection->OnReadable(now)) kept.push_back(std::move(connection));
  }
  connections = std::move(kept);
  if (connections.size() < context.options.max_connections) return;  // a peer had closed
  const auto victim =
      std::min_element(connections.begin(), connections.end(), [](const auto& a, const auto& b) {
        if (a->writing() != b->writing()) return !a->writing();
        return a->since() < b->since();
      });
  if (victim != connections.end()) connections.erase(victim);
}

}  // namespace outbox::util::http
