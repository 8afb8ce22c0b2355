#include "http_listen.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <stdexcept>

namespace outbox::util::http {
namespace {

// Room for a burst of connections while the server thread is busy in a
// handler; beyond the kernel's cap the kernel clamps it.
constexpr int kBacklog = 128;

// A TCP connection is handed to accept() only once its first bytes have
// arrived (or after about this long). So a connection the server reads has
// its request waiting: one from a client descheduled between connect and
// send is not pushed out at the connection cap by a flood of idle ones
// (they wait in the kernel, holding no descriptor of ours).
constexpr int kDeferAcceptSeconds = 1;

[[noreturn]] void Fail(const std::string& where, const std::string& reason) {
  throw std::runtime_error("cannot listen on " + where + " (" + reason + ")");
}

sockaddr_un UnixAddress(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    Fail(path, "a Unix socket path must have 1 to " + std::to_string(sizeof(address.sun_path) - 1) +
                   " bytes");
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

// Whether a server answers on the socket at `path`.
bool SocketAnswers(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const sockaddr_un address = UnixAddress(path);
  const bool answers =
      ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return answers;
}

// Refuses an existing `path` unless it is a dead server's socket.
void CheckExisting(const std::string& path) {
  struct stat existing {};
  if (::lstat(path.c_str(), &existing) != 0) {
    if (errno == ENOENT) return;
    Fail(path, std::strerror(errno));
  }
  if (!S_ISSOCK(existing.st_mode)) Fail(path, "exists and is not a socket");
  if (SocketAnswers(path)) Fail(path, "another server answers on it");
}

}  // namespace

int ListenTcp(const ListenAddress& address, int& port) {
  const std::string where = address.host + ":" + std::to_string(address.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const int looked =
      ::getaddrinfo(address.host.c_str(), std::to_string(address.port).c_str(), &hints, &found);
  if (looked != 0) Fail(where, ::gai_strerror(looked));
  std::string reason = "no address";
  int fd = -1;
  for (const addrinfo* at = found; at != nullptr && fd < 0; at = at->ai_next) {
    fd = ::socket(at->ai_family, at->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, at->ai_protocol);
    if (fd < 0) {
      reason = std::strerror(errno);
      continue;
    }
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (::setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &kDeferAcceptSeconds,
                     sizeof(kDeferAcceptSeconds)) != 0) {
      reason = std::string("TCP_DEFER_ACCEPT: ") + std::strerror(errno);
      ::close(fd);
      fd = -1;
    } else if (::bind(fd, at->ai_addr, at->ai_addrlen) != 0 || ::listen(fd, kBacklog) != 0) {
      reason = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) Fail(where, reason);
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(bound).sin6_port
                                           : reinterpret_cast<sockaddr_in&>(bound).sin_port);
  return fd;
}

int ListenUnix(const std::string& path, mode_t mode) {
  UnixAddress(path);  // checks the length
  CheckExisting(path);
  std::random_device random;
  const std::string temporary = path + ".tmp" + std::to_string(random());
  const sockaddr_un address = UnixAddress(temporary);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) Fail(path, std::strerror(errno));
  // bind creates the file and fails on any existing name, a link included.
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const std::string reason = std::strerror(errno);
    ::close(fd);
    Fail(path, reason);
  }
  // Not listening yet: nobody can connect while the mode is set. rename
  // replaces a dead socket at `path` (or a link: never followed).
  if (::fchmodat(AT_FDCWD, temporary.c_str(), mode, AT_SYMLINK_NOFOLLOW) != 0 &&
      ::chmod(temporary.c_str(), mode) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(temporary.c_str());
    ::close(fd);
    Fail(path, "chmod: " + reason);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0 || ::listen(fd, kBacklog) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(temporary.c_str());
    ::close(fd);
    Fail(path, reason);
  }
  return fd;
}

}  // namespace outbox::util::http
