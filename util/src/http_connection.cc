#include "http_connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <exception>
#include <utility>

namespace outbox::util::http {
namespace {

// Bytes read per recv; also the most read past a request head.
constexpr std::size_t kReadChunk = 16 * 1024;
// Chunked framing allowed beyond the decoded body's bound.
constexpr std::size_t kChunkedSlack = 4096;

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::optional<std::string_view> FindHeader(const RequestHead& head, std::string_view name) {
  for (const auto& [key, value] : head.headers) {
    if (EqualsIgnoreCase(key, name)) return value;
  }
  return std::nullopt;
}

std::size_t CountHeader(const RequestHead& head, std::string_view name) {
  return static_cast<std::size_t>(
      std::count_if(head.headers.begin(), head.headers.end(),
                    [name](const auto& header) { return EqualsIgnoreCase(header.first, name); }));
}

// A status of three digits, header names that are tokens and values
// without line breaks: a handler cannot split the response.
bool WellFormed(const Response& response) {
  if (response.status < 100 || response.status > 999) return false;
  return std::all_of(response.headers.begin(), response.headers.end(), [](const auto& header) {
    return !header.first.empty() && header.first.find_first_of(":\r\n \t") == std::string::npos &&
           header.second.find_first_of(std::string_view("\r\n\0", 3)) == std::string::npos;
  });
}

bool WantsClose(const RequestHead& head) {
  const auto connection = FindHeader(head, "connection");
  if (head.minor_version == 0) return !connection || !EqualsIgnoreCase(*connection, "keep-alive");
  return connection && EqualsIgnoreCase(*connection, "close");
}

}  // namespace

Connection::Connection(int fd, std::optional<PeerCredentials> peer, std::string remote_address,
                       const ServerContext& context, Clock::time_point now)
    : fd_(fd),
      peer_(peer),
      remote_address_(std::move(remote_address)),
      context_(context),
      since_(now),
      deadline_(now + context.options.request_timeout) {}

Connection::~Connection() { ::close(fd_); }

short Connection::Events() const { return state_ == State::kWriting ? POLLOUT : POLLIN; }

bool Connection::OnReadable(Clock::time_point now) {
  std::size_t room = kReadChunk;
  if (state_ == State::kIdle || state_ == State::kHead) {
    // One byte past the bound is enough to know it was passed.
    room = std::min(room, context_.options.max_header_bytes + 1 -
                              std::min(in_.size(), context_.options.max_header_bytes));
  }
  char buffer[kReadChunk];
  const ssize_t got = ::recv(fd_, buffer, room, 0);
  if (got == 0) return false;  // the peer closed
  if (got < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  in_.append(buffer, static_cast<std::size_t>(got));
  if (state_ == State::kIdle) {
    // A kept-alive connection's next request gets a deadline of its own.
    if (served_ > 0) deadline_ = now + context_.options.request_timeout;
    state_ = State::kHead;
  }
  return Process(now);
}

bool Connection::Process(Clock::time_point now) {
  for (;;) {
    if (state_ == State::kBody && !TakeBody(now)) return true;  // waits for more
    if (state_ == State::kWriting) return Flush(now);
    if (in_.empty()) return true;
    HeadParse parse =
        ParseRequestHead(in_, context_.options.max_header_bytes, context_.options.max_header_count);
    if (parse.status != 0) {
      close_after_write_ = true;
      Refuse(parse.status, now);
      continue;
    }
    if (!parse.head) return true;
    state_ = State::kHead;
    in_.erase(0, parse.consumed);
    StartRequest(std::move(*parse.head), now);
  }
}

const Route* Connection::FindRoute(const RequestHead& head, std::string& allow) const {
  for (const Route& route : context_.routes) {
    const bool path_matches = route.prefix
                                  ? head.path.compare(0, route.path.size(), route.path) == 0
                                  : head.path == route.path;
    if (!path_matches) continue;
    if (route.method == head.method || (route.method == "GET" && head.method == "HEAD")) {
      return &route;
    }
    allow += (allow.empty() ? "" : ", ") + route.method;
    if (route.method == "GET") allow += ", HEAD";
  }
  return nullptr;
}

// Answers the request at once, or leaves it waiting for its body (which
// may be empty and so complete already).
void Connection::StartRequest(RequestHead head, Clock::time_point now) {
  head_only_ = head.method == "HEAD";
  const bool sent_body = FindHeader(head, "transfer-encoding") ||
                         FindHeader(head, "content-length").value_or("0") != "0";
  if (WantsClose(head) || served_ + 1 >= context_.options.max_requests_per_connection) {
    close_after_write_ = true;
  }
  std::string allow;
  route_ = FindRoute(head, allow);
  head_ = std::move(head);
  if (route_ == nullptr) {
    // Never read a body for a request refused: close instead.
    if (sent_body) close_after_write_ = true;
    Response refusal = Response::Text(allow.empty() ? 404 : 405,
                                      allow.empty() ? "not found\n" : "method not allowed\n");
    if (!allow.empty()) refusal.headers.emplace_back("Allow", allow);
    Answer(std::move(refusal), now);
    return;
  }
  chunked_ = false;
  content_length_ = 0;
  if (!sent_body || ExpectBody(*route_, now)) state_ = State::kBody;
}

bool Connection::ExpectBody(const Route& route, Clock::time_point now) {
  const RequestHead& head = *head_;
  close_after_write_ = true;  // until the body is read whole
  if (route.max_body_bytes == 0) {
    Refuse(413, now);
    return false;
  }
  const auto encoding = FindHeader(head, "transfer-encoding");
  const auto length = FindHeader(head, "content-length");
  if ((encoding && length) || CountHeader(head, "content-length") > 1 ||
      CountHeader(head, "transfer-encoding") > 1) {
    Refuse(400, now);  // ambiguous framing (request smuggling)
    return false;
  }
  if (encoding && !EqualsIgnoreCase(*encoding, "chunked")) {
    Refuse(501, now);
    return false;
  }
  const auto coding = FindHeader(head, "content-encoding");
  if (coding && !EqualsIgnoreCase(*coding, "identity")) {
    Refuse(415, now);  // bodies are never decompressed
    return false;
  }
  chunked_ = encoding.has_value();
  content_length_ = 0;
  if (length) {
    const auto [end, error] =
        std::from_chars(length->data(), length->data() + length->size(), content_length_);
    if (error != std::errc() || end != length->data() + length->size()) {
      Refuse(400, now);
      return false;
    }
    if (content_length_ > route.max_body_bytes) {
      Refuse(413, now);
      return false;
    }
  }
  const auto expect = FindHeader(head, "expect");
  if (expect && EqualsIgnoreCase(*expect, "100-continue")) {
    // Best effort: a client that misses it sends the body after a pause.
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    (void)::send(fd_, kContinue.data(), kContinue.size(), MSG_NOSIGNAL);
  }
  close_after_write_ =
      WantsClose(head) || served_ + 1 >= context_.options.max_requests_per_connection;
  return true;
}

// Calls the handler once the body is complete; false while it is not.
bool Connection::TakeBody(Clock::time_point now) {
  std::string body;
  if (chunked_) {
    ChunkedParse parse = DecodeChunked(in_, route_->max_body_bytes);
    if (parse.state == ChunkedParse::State::kIncomplete &&
        in_.size() > 2 * route_->max_body_bytes + kChunkedSlack) {
      parse.state = ChunkedParse::State::kTooLarge;  // framing out of proportion
    }
    switch (parse.state) {
      case ChunkedParse::State::kIncomplete: return false;
      case ChunkedParse::State::kMalformed:
        close_after_write_ = true;
        Refuse(400, now);
        return true;
      case ChunkedParse::State::kTooLarge:
        close_after_write_ = true;
        Refuse(413, now);
        return true;
      case ChunkedParse::State::kComplete: break;
    }
    body = std::move(parse.body);
    in_.erase(0, parse.consumed);
  } else {
    if (in_.size() < content_length_) return false;
    body = in_.substr(0, content_length_);
    in_.erase(0, content_length_);
  }
  Request request;
  request.method = std::move(head_->method);
  request.path = std::move(head_->path);
  request.query = std::move(head_->query);
  request.headers = std::move(head_->headers);
  request.body = std::move(body);
  request.peer = peer_;
  request.remote_address = remote_address_;
  Response response;
  try {
    response = route_->handler(request);
  } catch (const std::exception& e) {
    if (context_.error_log)
      context_.error_log("http: handler for " + request.path + " failed: " + e.what());
    response = Response::Text(500, "internal error\n");
  }
  Answer(std::move(response), now);
  return true;
}

void Connection::Refuse(int status, Clock::time_point now) {
  Answer(Response::Text(status, std::string(ReasonPhrase(status)) + "\n"), now);
}

void Connection::Answer(Response response, Clock::time_point now) {
  if (!WellFormed(response)) {
    if (context_.error_log) {
      context_.error_log("http: a handler answered with a malformed status or header");
    }
    response = Response::Text(500, "internal error\n");
  }
  out_ = "HTTP/1.1 " + std::to_string(response.status) + " " +
         std::string(ReasonPhrase(response.status)) + "\r\n";
  for (const auto& [name, value] : response.headers) {
    // The server frames the response itself.
    if (EqualsIgnoreCase(name, "content-length") || EqualsIgnoreCase(name, "connection")) continue;
    out_ += name + ": " + value + "\r\n";
  }
  out_ += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  out_ += close_after_write_ ? "Connection: close\r\n\r\n" : "\r\n";
  if (!head_only_) out_ += response.body;
  out_sent_ = 0;
  head_.reset();
  route_ = nullptr;
  state_ = State::kWriting;
  deadline_ = now + context_.options.write_timeout;
}

bool Connection::OnWritable(Clock::time_point now) { return Flush(now); }

bool Connection::Flush(Clock::time_point now) {
  while (out_sent_ < out_.size()) {
    const ssize_t sent =
        ::send(fd_, out_.data() + out_sent_, out_.size() - out_sent_, MSG_NOSIGNAL);
    if (sent < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    out_sent_ += static_cast<std::size_t>(sent);
  }
  if (close_after_write_) return false;
  std::string().swap(out_);  // a large /metrics answer is not kept per connection
  ++served_;
  head_only_ = false;
  state_ = in_.empty() ? State::kIdle : State::kHead;
  since_ = now;
  deadline_ =
      now + (in_.empty() ? context_.options.keep_alive_timeout : context_.options.request_timeout);
  // A pipelined request already received is served now.
  return Process(now);
}

bool Connection::OnDeadline(Clock::time_point now) {
  if (state_ == State::kHead || state_ == State::kBody) {
    close_after_write_ = true;
    Refuse(408, now);
    // One try: a peer that does not read gets no more time.
    (void)::send(fd_, out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  return false;
}

}  // namespace outbox::util::http
