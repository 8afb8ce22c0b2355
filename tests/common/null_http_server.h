// NullHttpServer: an HTTP/1.1 sink on 127.0.0.1 that answers every request
// with an empty 200 and keeps the connection. One epoll thread, no routing,
// no parsing beyond finding the end of each request, so that a benchmark
// measures the client, not the server. Used by transport_bench and by the
// benchmarks under tests/bench/.
//
// Thread-safe: responses() and WaitForResponses() may be called from any
// thread while the server runs.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace outbox::testing {

class NullHttpServer {
 public:
  NullHttpServer() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    Check(listen_fd_ >= 0 && bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), size) == 0 &&
              listen(listen_fd_, 128) == 0 &&
              getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &size) == 0,
          "null server: listen");
    port_ = ntohs(address.sin_port);
    epoll_fd_ = epoll_create1(0);
    stop_fd_ = eventfd(0, EFD_NONBLOCK);
    Check(epoll_fd_ >= 0 && stop_fd_ >= 0, "null server: epoll");
    Watch(listen_fd_);
    Watch(stop_fd_);
    thread_ = std::thread([this] { Run(); });
  }

  ~NullHttpServer() {
    const std::uint64_t one = 1;
    if (write(stop_fd_, &one, sizeof one) != sizeof one) std::abort();
    thread_.join();
    for (const auto& [fd, buffer] : connections_) close(fd);
    close(listen_fd_);
    close(epoll_fd_);
    close(stop_fd_);
  }

  NullHttpServer(const NullHttpServer&) = delete;
  NullHttpServer& operator=(const NullHttpServer&) = delete;

  int port() const { return port_; }
  std::string Url(const std::string& path = "/events") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

  // Requests answered so far.
  std::int64_t responses() const { return responses_.load(); }
  // When the last answer was written.
  std::chrono::steady_clock::time_point last_response() const {
    return std::chrono::steady_clock::time_point(
        std::chrono::steady_clock::duration(last_response_ns_.load()));
  }

  // Blocks (without spinning) until at least `count` requests were answered;
  // false if `limit` passed first.
  bool WaitForResponses(std::int64_t count, std::chrono::milliseconds limit) {
    waiters_.fetch_add(1);
    bool reached = false;
    {
      std::unique_lock lock(mutex_);
      reached = answered_.wait_for(lock, limit, [&] { return responses_.load() >= count; });
    }
    waiters_.fetch_sub(1);
    return reached;
  }

 private:
  static void Check(bool ok, const char* what) {
    if (!ok) throw std::runtime_error(what);
  }

  void Watch(int fd) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    Check(epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) == 0, "null server: epoll_ctl");
  }

  void Run() {
    std::vector<epoll_event> events(64);
    while (true) {
      const int ready = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), -1);
      for (int i = 0; i < ready; ++i) {
        const int fd = events[static_cast<std::size_t>(i)].data.fd;
        if (fd == stop_fd_) return;
        if (fd == listen_fd_) {
          Accept();
        } else if (!Serve(fd)) {
          close(fd);  // also leaves the epoll set
          connections_.erase(fd);
        }
      }
    }
  }

  void Accept() {
    for (int fd; (fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK)) >= 0;) {
      const int on = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
      connections_[fd];
      Watch(fd);
    }
  }

  // Reads what arrived and answers each complete request; false when the
  // connection is finished.
  bool Serve(int fd) {
    static constexpr std::string_view kResponse = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    std::string& buffer = connections_[fd];
    char chunk[65536];
    const ssize_t received = read(fd, chunk, sizeof chunk);
    if (received <= 0) return false;
    buffer.append(chunk, static_cast<std::size_t>(received));
    while (true) {
      const std::size_t head_end = buffer.find("\r\n\r\n");
      if (head_end == std::string::npos) return true;
      const std::size_t request_end = head_end + 4 + ContentLength(buffer.substr(0, head_end));
      if (buffer.size() < request_end) return true;
      buffer.erase(0, request_end);
      if (write(fd, kResponse.data(), kResponse.size()) != static_cast<ssize_t>(kResponse.size())) {
        return false;
      }
      Answered();
    }
  }

  void Answered() {
    last_response_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count());
    responses_.fetch_add(1);
    // Dekker-style with WaitForResponses (both sequentially consistent): a
    // waiter that registered before this load is woken; one that registers
    // after it sees the new count in its predicate.
    if (waiters_.load() > 0) {
      { std::lock_guard lock(mutex_); }
      answered_.notify_all();
    }
  }

  static std::size_t ContentLength(std::string head) {
    std::transform(head.begin(), head.end(), head.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const std::size_t at = head.find("\r\ncontent-length:");
    return at == std::string::npos ? 0 : std::strtoul(head.c_str() + at + 17, nullptr, 10);
  }

  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int stop_fd_ = -1;
  int port_ = 0;
  std::map<int, std::string> connections_;  // only touched by the server thread
  std::atomic<std::int64_t> responses_{0};
  std::atomic<std::int64_t> last_response_ns_{0};
  std::atomic<int> waiters_{0};
  std::mutex mutex_;                    // pairs with answered_; guards nothing else
  std::condition_variable answered_;
  std::thread thread_;  // last: started after everything it uses
};

}  // namespace outbox::testing
