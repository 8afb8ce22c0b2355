#include "fault_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <condition_variable>
#include <stdexcept>

namespace outbox::reliability::testing {
namespace {

// How often blocked loops look at the stop flag and the server's generation
// (bumped when it goes down, which closes every connection).
constexpr int kPollMs = 20;

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

std::string Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return std::string(text);
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::string Response(int status, std::string_view reason, std::string_view extra_headers,
                     std::string_view body) {
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) + "\r\n" +
         std::string(extra_headers) + "Content-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + std::string(body);
}

}  // namespace

std::string FaultRequest::Header(const std::string& name) const {
  const auto found = headers.find(name);
  return found == headers.end() ? "" : found->second;
}

std::string_view FaultName(Fault fault) {
  switch (fault) {
    case Fault::kOk:
      return "ok";
    case Fault::kServerError:
      return "500";
    case Fault::kUnavailable:
      return "503";
    case Fault::kTooMany:
      return "429+Retry-After";
    case Fault::kReset:
      return "reset mid-response";
    case Fault::kHang:
      return "hang past timeout";
    case Fault::kEcho:
      return "500 echoing headers";
    case Fault::kTooLarge:
      return "413";
  }
  return "?";
}

// State shared by the acceptor and the connection threads.
struct FaultServer::Shared {
  std::condition_variable applied;  // the acceptor applied `down_`
  bool listening = false;           // guarded by FaultServer::mutex_
  std::atomic<int> generation{0};
};

FaultServer::FaultServer(Decide decide)
    : decide_(std::move(decide)), shared_(std::make_unique<Shared>()) {}

FaultServer::~FaultServer() { Stop(); }

bool FaultServer::Listen() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port_));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(fd, 128) != 0) {
    ::close(fd);
    return false;
  }
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  if (port_ == 0) port_ = ntohs(address.sin_port);  // the first bind only
  listen_fd_ = fd;
  return true;
}

void FaultServer::Start() {
  if (::pipe2(wake_, O_CLOEXEC) != 0) throw std::runtime_error("fault server: pipe failed");
  if (!Listen()) throw std::runtime_error("fault server: cannot listen on 127.0.0.1");
  shared_->listening = true;
  acceptor_ = std::jthread([this](std::stop_token stop) { AcceptLoop(stop); });
}

void FaultServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (wake_[1] >= 0) {
    const char byte = 0;
    // Never read: the pipe stays readable, so every poll() sees the stop.
    [[maybe_unused]] const ssize_t n = ::write(wake_[1], &byte, 1);
  }
  if (acceptor_.joinable()) acceptor_.join();
  std::list<Connection> connections;
  {
    std::lock_guard lock(mutex_);
    connections.swap(connections_);
  }
  for (auto& connection : connections) connection.thread.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  for (int& fd : wake_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

void FaultServer::SetDown(bool down) {
  std::unique_lock lock(mutex_);
  down_ = down;
  if (down) shared_->generation.fetch_add(1);
  const bool ok = shared_->applied.wait_for(lock, std::chrono::seconds(10), [&] {
    return shared_->listening == !down;
  });
  if (!ok) throw std::runtime_error("fault server: could not bind its port again");
}

std::string FaultServer::Url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

std::map<std::string, FaultServer::KeyCount> FaultServer::Counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

std::map<Fault, int> FaultServer::FaultCounts() const {
  std::lock_guard lock(mutex_);
  return faults_;
}

std::vector<FaultRequest> FaultServer::Requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

void FaultServer::SetEchoSuffix(std::string suffix) {
  std::lock_guard lock(mutex_);
  echo_suffix_ = std::move(suffix);
}

void FaultServer::AcceptLoop(std::stop_token stop) {
  while (!stop.stop_requested() && !stopping_.load()) {
    {
      std::lock_guard lock(mutex_);
      if (down_ && listen_fd_ >= 0) {
        ::close(listen_fd_);
        listen_fd_ = -1;
        shared_->listening = false;
        shared_->applied.notify_all();
      } else if (!down_ && listen_fd_ < 0 && Listen()) {
        // Listen() fails while the kernel still holds the port: next round.
        shared_->listening = true;
        shared_->applied.notify_all();
      }
      // Join connections that have ended.
      for (auto it = connections_.begin(); it != connections_.end();) {
        if (it->done->load()) {
          it->thread.join();
          it = connections_.erase(it);
        } else {
          ++it;
        }
      }
    }
    pollfd fds[2] = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    const nfds_t count = listen_fd_ >= 0 ? 2 : 1;
    if (::poll(fds, count, kPollMs) <= 0) continue;
    if (fds[0].revents != 0) return;
    if (count == 2 && (fds[1].revents & POLLIN) != 0) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      auto done = std::make_shared<std::atomic<bool>>(false);
      std::lock_guard lock(mutex_);
      connections_.push_back(
          {std::jthread([this, fd, done](std::stop_token connection_stop) {
             Serve(fd, connection_stop);
             ::close(fd);
             done->store(true);
           }),
           done});
    }
  }
}

// Waits for bytes on `fd`; false when the peer closed, the server stops or
// went down since the connection was accepted.
bool FaultServer::WaitReadable(int fd, int generation) {
  for (;;) {
    if (stopping_.load() || shared_->generation.load() != generation) return false;
    pollfd fds[2] = {{fd, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    const int ready = ::poll(fds, 2, kPollMs);
    if (ready < 0 && errno != EINTR) return false;
    if (ready <= 0) continue;
    if (fds[1].revents != 0) return false;
    return (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
  }
}

bool FaultServer::ReadMore(int fd, int generation, std::string& buffer) {
  if (!WaitReadable(fd, generation)) return false;
  char chunk[16384];
  const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
  if (n <= 0) return false;
  buffer.append(chunk, static_cast<std::size_t>(n));
  return true;
}

void FaultServer::Serve(int fd, std::stop_token /*stop*/) {
  const int generation = shared_->generation.load();
  std::string buffer;
  for (;;) {
    std::size_t header_end;
    while ((header_end = buffer.find("\r\n\r\n")) == std::string::npos) {
      if (!ReadMore(fd, generation, buffer)) return;
    }
    FaultRequest request;
    std::size_t content_length = 0;
    {
      const std::string head = buffer.substr(0, header_end);
      std::size_t line_end = head.find("\r\n");
      const std::string request_line = head.substr(0, line_end);
      const auto space1 = request_line.find(' ');
      const auto space2 = request_line.find(' ', space1 + 1);
      request.method = request_line.substr(0, space1);
      request.path = request_line.substr(space1 + 1, space2 - space1 - 1);
      while (line_end != std::string::npos && line_end < head.size()) {
        const std::size_t start = line_end + 2;
        line_end = head.find("\r\n", start);
        const std::string line = head.substr(start, line_end - start);
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        request.headers[Lower(Trim(line.substr(0, colon)))] = Trim(line.substr(colon + 1));
      }
      const std::string length = request.Header("content-length");
      if (!length.empty()) content_length = std::stoul(length);
    }
    const std::size_t total = header_end + 4 + content_length;
    while (buffer.size() < total) {
      if (!ReadMore(fd, generation, buffer)) return;
    }
    request.body = buffer.substr(header_end + 4, content_length);
    buffer.erase(0, total);

    Fault fault = Fault::kServerError;
    try {
      fault = decide_(request);
    } catch (...) {  // a bad script answers 500 rather than ending the test process
    }
    const std::string key = request.Header("idempotency-key");
    {
      std::lock_guard lock(mutex_);
      KeyCount& count = counts_[key];
      ++count.received;
      if (fault == Fault::kOk || fault == Fault::kReset) ++count.accepted;
      ++faults_[fault];
      requests_.push_back(request);
    }
    switch (fault) {
      case Fault::kOk:
        if (!SendAll(fd, Response(200, "OK", "", ""))) return;
        {
          std::lock_guard lock(mutex_);
          ++counts_[key].acknowledged;
        }
        break;
      case Fault::kServerError:
        if (!SendAll(fd, Response(500, "Internal Server Error", "", "injected failure"))) return;
        break;
      case Fault::kUnavailable:
        if (!SendAll(fd, Response(503, "Service Unavailable", "", "injected outage"))) return;
        break;
      case Fault::kTooMany:
        if (!SendAll(fd, Response(429, "Too Many Requests", "Retry-After: 1\r\n", "slow down"))) {
          return;
        }
        break;
      case Fault::kTooLarge:
        if (!SendAll(fd, Response(413, "Content Too Large", "", "body over 2 KiB"))) return;
        break;
      case Fault::kEcho: {
        std::string body;
        for (const auto& [name, value] : request.headers) body += name + ": " + value + "\n";
        {
          std::lock_guard lock(mutex_);
          body += echo_suffix_;
        }
        if (!SendAll(fd, Response(500, "Internal Server Error", "", body))) return;
        break;
      }
      case Fault::kReset: {
        // Part of a success, then a hard reset: the receiver did the work
        // but the sender never learns it.
        SendAll(fd, "HTTP/1.1 200 O");
        const linger hard{1, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
        return;
      }
      case Fault::kHang:
        // Until the client times out and closes, or the server stops.
        while (WaitReadable(fd, generation)) {
          char chunk[4096];
          if (::recv(fd, chunk, sizeof chunk, 0) <= 0) return;
        }
        return;
    }
  }
}

}  // namespace outbox::reliability::testing
