// The AMQP 0-9-1 sink (RabbitMQ): persistent, mandatory publishes on one
// channel in publisher-confirm mode, over one long-lived connection per sink.
//
// rabbitmq-c's connection is not thread-safe, so one I/O thread owns it: the
// callers hand their publications over (several in flight at once) and each
// waits for its own answer, which the I/O thread reads as it arrives:
// basic.ack (delivered), basic.nack (the broker could not take it), or a
// basic.return before the ack (no queue bound: unroutable). rabbitmq-c 0.11
// has no confirm-wait helper, so those frames are read here.
#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "amqp_publication.h"
#include "internal.h"
#include "outbox/transport.h"

namespace outbox::transport::internal {
namespace {

constexpr amqp_channel_t kChannel = 1;
constexpr int kFrameMax = 131072;  // rabbitmq-c's and RabbitMQ's default

amqp_bytes_t Bytes(const std::string& text) {
  return amqp_bytes_t{text.size(), const_cast<char*>(text.data())};
}

std::string Text(amqp_bytes_t bytes) {
  return std::string(static_cast<const char*>(bytes.bytes), bytes.len);
}

timeval Timeval(std::int64_t ms) {
  return timeval{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
}

// "403 ACCESS_REFUSED - ..." from a connection.close or channel.close.
std::string CloseText(const amqp_method_t& method, bool& configuration) {
  std::uint16_t code = 0;
  std::string text;
  if (method.id == AMQP_CONNECTION_CLOSE_METHOD) {
    const auto* close = static_cast<const amqp_connection_close_t*>(method.decoded);
    code = close->reply_code;
    text = Text(close->reply_text);
  } else if (method.id == AMQP_CHANNEL_CLOSE_METHOD) {
    const auto* close = static_cast<const amqp_channel_close_t*>(method.decoded);
    code = close->reply_code;
    text = Text(close->reply_text);
  }
  // access refused, not found (exchange or vhost), not allowed (vhost):
  // only a change of configuration fixes them.
  configuration = code == 403 || code == 404 || code == 530;
  return std::to_string(code) + " " + text;
}

// What went wrong in an RPC (login, channel.open, confirm.select).
std::string ReplyError(const amqp_rpc_reply_t& reply, bool& configuration) {
  configuration = false;
  switch (reply.reply_type) {
    case AMQP_RESPONSE_NORMAL:
      return "";
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
      return amqp_error_string2(reply.library_error);
    case AMQP_RESPONSE_SERVER_EXCEPTION:
      return "broker refused: " + CloseText(reply.reply, configuration);
    default:
      return "no reply";
  }
}

// The publications a connection has sent and not yet had an answer for, by
// delivery tag (1, 2, ... per channel in confirm mode).
using InFlight = std::map<std::uint64_t, std::shared_ptr<Publication>>;

class AmqpSink final : public Sink {
 public:
  explicit AmqpSink(EndpointOptions options)
      : options_(std::move(options)),
        url_(ParseBrokerUrl(options_.url)),
        vhost_(AmqpVirtualHost(url_.path)),
        wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (wake_ < 0) throw std::runtime_error("amqp: eventfd failed");
  }

  ~AmqpSink() override {
    if (io_.joinable()) {
      io_.request_stop();
      Wake();
      io_.join();
    }
    close(wake_);
  }

  AmqpSink(const AmqpSink&) = delete;
  AmqpSink& operator=(const AmqpSink&) = delete;

  SinkKind kind() const override { return SinkKind::kAmqp; }

  Result Push(const Message& message) override {
    return PushBatch(std::span<const Message>(&message, 1));
  }

  // The batch's publications go out together and their confirms are waited
  // for together; its Result is the first failure in order.
  Result PushBatch(std::span<const Message> messages) override {
    if (messages.empty()) throw std::invalid_argument("PushBatch: empty batch");
    if (messages.size() > options_.batch.max_messages) {
      throw std::invalid_argument("PushBatch: more than batch.max_messages messages");
    }
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<Publication>> batch;
    Result result;
    result.outcome = Outcome::kDelivered;
    for (const Message& message : messages) {
      std::shared_ptr<Publication> publication;
      try {
        publication = MakePublication(options_, message);
      } catch (const std::invalid_argument& error) {
        result = MessageFailure(error.what());
        break;
      }
      result.request_bytes += publication->body.size();
      batch.push_back(std::move(publication));
    }
    if (!batch.empty()) {
      const std::size_t bytes = result.request_bytes;
      const Result sent = SendAndWait(batch);
      // A refusal found while building stays the batch's result unless an
      // earlier member failed.
      if (sent.outcome != Outcome::kDelivered || result.outcome == Outcome::kDelivered) {
        result = sent;
      }
      result.request_bytes = bytes;
    }
    result.duration_us = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::steady_clock::now() - start)
                             .count();
    return result;
  }

  void AbortAll() override {
    const std::lock_guard lock(mutex_);
    aborted_ = true;
    for (Publication* waiting : waiting_) waiting->answered.notify_one();
  }

  void ResetAbort() override {
    const std::lock_guard lock(mutex_);
    aborted_ = false;
  }

 private:
  // Hands `batch` to the I/O thread and waits for every answer, at most
  // timeout_ms in all.
  Result SendAndWait(const std::vector<std::shared_ptr<Publication>>& batch) {
    std::call_once(start_once_, [this] { io_ = std::jthread([this](std::stop_token stop) {
                                            RunIo(stop);
                                          }); });
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.timeout_ms);
    std::unique_lock lock(mutex_);
    if (aborted_) return EndpointFailure("aborted");
    if (!blocked_.empty()) return EndpointFailure("connection blocked by the broker: " + blocked_);
    for (const auto& publication : batch) queue_.push_back(publication);
    lock.unlock();
    Wake();
    lock.lock();
    for (const auto& publication : batch) {
      waiting_.insert(publication.get());
      publication->answered.wait_until(lock, deadline,
                                       [&] { return publication->done || aborted_; });
      waiting_.erase(publication.get());
      if (!publication->done) {
        // The I/O thread drops what it finds abandoned, sent or not.
        for (const auto& each : batch) each->abandoned = true;
        return EndpointFailure(aborted_ ? "aborted" : "timeout waiting for the broker's confirm");
      }
      if (publication->result.outcome != Outcome::kDelivered) {
        for (const auto& each : batch) each->abandoned = true;
        return publication->result;
      }
    }
    Result delivered;
    delivered.outcome = Outcome::kDelivered;
    return delivered;
  }

  void Wake() {
    const std::uint64_t one = 1;
    // A full counter already wakes the thread; nothing to do about an error.
    [[maybe_unused]] const ssize_t written = write(wake_, &one, sizeof one);
  }

  // --- the I/O thread --------------------------------------------------------

  void RunIo(std::stop_token stop) {
    while (!stop.stop_requested()) {
      std::deque<std::shared_ptr<Publication>> queued = TakeQueued();
      if (!queued.empty() && connection_ == nullptr) Connect(queued);
      for (auto& publication : queued) Send(std::move(publication));
      if (connection_ != nullptr) ReadAvailable();
      if (stop.stop_requested()) break;
      WaitForWork();
    }
    Disconnect("the sink is closing", true);
  }

  std::deque<std::shared_ptr<Publication>> TakeQueued() {
    const std::lock_guard lock(mutex_);
    std::deque<std::shared_ptr<Publication>> taken;
    taken.swap(queue_);
    return taken;
  }

  // Sleeps until the socket has data, a caller hands over work, or a
  // heartbeat may be due.
  void WaitForWork() {
    std::uint64_t count = 0;
    pollfd fds[2] = {{wake_, POLLIN, 0}, {-1, POLLIN, 0}};
    if (connection_ != nullptr) fds[1].fd = amqp_get_sockfd(connection_);
    int timeout_ms = 1000;
    if (options_.amqp.heartbeat_s > 0) {
      timeout_ms = std::min(timeout_ms, options_.amqp.heartbeat_s * 1000 / 2);
    }
    if (poll(fds, fds[1].fd >= 0 ? 2 : 1, timeout_ms) > 0 && (fds[0].revents & POLLIN) != 0) {
      [[maybe_unused]] const ssize_t read_bytes = read(wake_, &count, sizeof count);
    }
  }

  // Opens the connection, logs in announcing connection.blocked, opens the
  // channel and puts it in confirm mode. On failure `queued` is answered
  // with the reason.
  void Connect(std::deque<std::shared_ptr<Publication>>& queued) {
    bool configuration = false;
    const std::string error = TryConnect(configuration);
    if (error.empty()) return;
    Disconnect("", false);
    const Result failed = EndpointFailure("cannot connect to the AMQP broker: " + error,
                                          configuration);
    const std::lock_guard lock(mutex_);
    for (const auto& publication : queued) Answer(*publication, failed);
    queued.clear();
  }

  std::string TryConnect(bool& configuration) {
    connection_ = amqp_new_connection();
    if (connection_ == nullptr) return "out of memory";
    amqp_socket_t* socket =
        url_.tls ? amqp_ssl_socket_new(connection_) : amqp_tcp_socket_new(connection_);
    if (socket == nullptr) return "cannot create a socket";
    if (url_.tls) {
      if (std::string error = ConfigureTls(socket); !error.empty()) return error;
    }
    timeval connect_timeout = Timeval(options_.connect_timeout_ms);
    int status = amqp_socket_open_noblock(socket, url_.host.c_str(), url_.port, &connect_timeout);
    if (status != AMQP_STATUS_OK) return amqp_error_string2(status);
    amqp_set_handshake_timeout(connection_, &connect_timeout);
    timeval rpc_timeout = Timeval(options_.timeout_ms);
    amqp_set_rpc_timeout(connection_, &rpc_timeout);
    const std::string user = options_.amqp.user.empty() ? "guest" : options_.amqp.user;
    const std::string password = options_.amqp.user.empty() ? "guest" : options_.amqp.password;
    ClientProperties properties;
    std::string error = ReplyError(
        amqp_login_with_properties(connection_, vhost_.c_str(), 1, kFrameMax,
                                   options_.amqp.heartbeat_s, &properties.table,
                                   AMQP_SASL_METHOD_PLAIN, user.c_str(), password.c_str()),
        configuration);
    if (!error.empty()) return error;
    amqp_channel_open(connection_, kChannel);
    error = ReplyError(amqp_get_rpc_reply(connection_), configuration);
    if (!error.empty()) return error;
    amqp_confirm_select(connection_, kChannel);
    error = ReplyError(amqp_get_rpc_reply(connection_), configuration);
    if (!error.empty()) return error;
    next_tag_ = 1;
    return "";
  }

  std::string ConfigureTls(amqp_socket_t* socket) {
    const TlsOptions& tls = options_.tls;
    const std::string ca =
        tls.ca_file.empty() ? "/etc/ssl/certs/ca-certificates.crt" : tls.ca_file;
    if (amqp_ssl_socket_set_cacert(socket, ca.c_str()) != AMQP_STATUS_OK) {
      return "cannot read the CA certificates " + ca;
    }
    if (!tls.client_cert_file.empty()) {
      const std::string& key =
          tls.client_key_file.empty() ? tls.client_cert_file : tls.client_key_file;
      if (amqp_ssl_socket_set_key(socket, tls.client_cert_file.c_str(), key.c_str()) !=
          AMQP_STATUS_OK) {
        return "cannot use the client certificate " + tls.client_cert_file;
      }
    }
    amqp_ssl_socket_set_verify_peer(socket, tls.insecure_skip_verify ? 0 : 1);
    amqp_ssl_socket_set_verify_hostname(socket, tls.insecure_skip_verify ? 0 : 1);
    return "";
  }

  // Publishes one publication unless its caller has given up; without a
  // connection it is answered with why.
  void Send(std::shared_ptr<Publication> publication) {
    {
      const std::lock_guard lock(mutex_);
      if (publication->abandoned) return;
      if (connection_ == nullptr) {
        Answer(*publication, EndpointFailure("not connected to the AMQP broker"));
        return;
      }
      if (!blocked_.empty()) {
        Answer(*publication, EndpointFailure("connection blocked by the broker: " + blocked_));
        return;
      }
    }
    PublicationFrame frame(*publication);
    const int status = amqp_basic_publish(
        connection_, kChannel, Bytes(publication->exchange), Bytes(publication->routing_key),
        /*mandatory=*/1, /*immediate=*/0, &frame.properties, Bytes(publication->body));
    in_flight_.emplace(next_tag_++, std::move(publication));
    if (status != AMQP_STATUS_OK) {
      Disconnect(std::string("publishing failed: ") + amqp_error_string2(status), false);
    }
  }

  // Handles every frame that has arrived, without waiting for more. rabbitmq-c
  // sends a due heartbeat while it looks.
  void ReadAvailable() {
    while (connection_ != nullptr) {
      amqp_frame_t frame;
      timeval now{0, 0};
      const int status = amqp_simple_wait_frame_noblock(connection_, &frame, &now);
      if (status == AMQP_STATUS_TIMEOUT) return;
      if (status != AMQP_STATUS_OK) {
        Disconnect(std::string("connection to the AMQP broker lost: ") +
                       amqp_error_string2(status),
                   false);
        return;
      }
      if (frame.frame_type == AMQP_FRAME_METHOD) HandleMethod(frame);
      if (connection_ != nullptr) amqp_maybe_release_buffers(connection_);
    }
  }

  void HandleMethod(const amqp_frame_t& frame) {
    const amqp_method_t& method = frame.payload.method;
    switch (method.id) {
      case AMQP_BASIC_ACK_METHOD: {
        const auto* ack = static_cast<const amqp_basic_ack_t*>(method.decoded);
        Settle(ack->delivery_tag, ack->multiple != 0, std::nullopt);
        break;
      }
      case AMQP_BASIC_NACK_METHOD: {
        const auto* nack = static_cast<const amqp_basic_nack_t*>(method.decoded);
        Settle(nack->delivery_tag, nack->multiple != 0,
               EndpointFailure("the broker nacked the message (it could not take it)"));
        break;
      }
      case AMQP_BASIC_RETURN_METHOD:
        HandleReturn(*static_cast<const amqp_basic_return_t*>(method.decoded));
        break;
      case AMQP_CONNECTION_BLOCKED_METHOD: {
        const auto* blocked = static_cast<const amqp_connection_blocked_t*>(method.decoded);
        Block(blocked->reason.len > 0 ? Text(blocked->reason) : "resource alarm");
        break;
      }
      case AMQP_CONNECTION_UNBLOCKED_METHOD: {
        const std::lock_guard lock(mutex_);
        blocked_.clear();
        break;
      }
      case AMQP_CONNECTION_CLOSE_METHOD:
      case AMQP_CHANNEL_CLOSE_METHOD: {
        bool configuration = false;
        const std::string text = CloseText(method, configuration);
        if (method.id == AMQP_CONNECTION_CLOSE_METHOD) {
          amqp_connection_close_ok_t ok{};
          amqp_send_method(connection_, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
        }
        Disconnect("the broker closed the " +
                       std::string(method.id == AMQP_CONNECTION_CLOSE_METHOD ? "connection"
                                                                             : "channel") +
                       ": " + text,
                   false, configuration);
        break;
      }
      default:
        break;  // nothing else is expected on a publishing channel
    }
  }

  // A basic.return comes before the ack of the same publish, with the
  // returned message: its message_id names the publication.
  void HandleReturn(const amqp_basic_return_t& returned) {
    const std::string error = "unroutable: exchange " +
                              (returned.exchange.len == 0 ? std::string("(default)")
                                                          : Text(returned.exchange)) +
                              ", routing key " + Text(returned.routing_key) + " (" +
                              std::to_string(returned.reply_code) + " " +
                              Text(returned.reply_text) + ")";
    amqp_message_t message;
    const amqp_rpc_reply_t reply = amqp_read_message(connection_, kChannel, &message, 0);
    if (reply.reply_type != AMQP_RESPONSE_NORMAL) {
      Disconnect("reading a returned message failed", false);
      return;
    }
    std::string id;
    if ((message.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG) != 0) {
      id = Text(message.properties.message_id);
    }
    amqp_destroy_message(&message);
    for (auto& [tag, publication] : in_flight_) {
      if (publication->message_id == id && !publication->returned) {
        publication->returned = true;
        publication->return_error = error;
        break;
      }
    }
  }

  // Answers the publication with `tag` (and, with `multiple`, every earlier
  // one): `failure`, or delivered unless it was returned.
  void Settle(std::uint64_t tag, bool multiple, const std::optional<Result>& failure) {
    const auto end = in_flight_.upper_bound(tag);
    auto begin = multiple ? in_flight_.begin() : in_flight_.find(tag);
    if (begin == in_flight_.end()) return;
    const std::lock_guard lock(mutex_);
    for (auto it = begin; it != end; ++it) {
      Publication& publication = *it->second;
      if (failure) {
        Answer(publication, *failure);
      } else if (publication.returned) {
        Answer(publication, MessageFailure(publication.return_error));
      } else {
        Result delivered;
        delivered.outcome = Outcome::kDelivered;
        Answer(publication, delivered);
      }
    }
    in_flight_.erase(begin, end);
  }

  // connection.blocked: the broker stopped reading from publishers (a memory
  // or disk alarm). What is in flight fails now rather than at the timeout,
  // and new publishes fail without I/O until connection.unblocked.
  void Block(const std::string& reason) {
    const std::lock_guard lock(mutex_);
    blocked_ = reason;
    const Result failed = EndpointFailure("connection blocked by the broker: " + reason);
    for (auto& [tag, publication] : in_flight_) Answer(*publication, failed);
    // Their acks may still come after the alarm: Answer ignores them then.
  }

  // Drops the connection, answering what is in flight with `reason`
  // (nothing to answer when `reason` is ""). `polite` closes the channel and
  // connection first (a shutdown); otherwise it is just destroyed.
  void Disconnect(const std::string& reason, bool polite, bool configuration = false) {
    if (connection_ != nullptr) {
      if (polite) {
        amqp_channel_close(connection_, kChannel, AMQP_REPLY_SUCCESS);
        amqp_connection_close(connection_, AMQP_REPLY_SUCCESS);
      }
      amqp_destroy_connection(connection_);
      connection_ = nullptr;
    }
    const std::lock_guard lock(mutex_);
    blocked_.clear();
    if (!reason.empty()) {
      const Result failed = EndpointFailure(reason, configuration);
      for (auto& [tag, publication] : in_flight_) Answer(*publication, failed);
    }
    in_flight_.clear();
  }

  // Under mutex_.
  static void Answer(Publication& publication, const Result& result) {
    if (publication.done) return;
    publication.done = true;
    publication.result = result;
    publication.answered.notify_one();
  }

  // rabbitmq-c's client properties, announcing the capabilities this sink
  // handles (without connection.blocked the broker never says it blocks).
  struct ClientProperties {
    ClientProperties() {
      capabilities_entries[0] = Entry("connection.blocked", true);
      capabilities_entries[1] = Entry("authentication_failure_close", true);
      capabilities_entries[2] = Entry("publisher_confirms", true);
      capabilities_entries[3] = Entry("basic.nack", true);
      entries[0].key = amqp_cstring_bytes("product");
      entries[0].value.kind = AMQP_FIELD_KIND_UTF8;
      entries[0].value.value.bytes = amqp_cstring_bytes("edge-outbox");
      entries[1].key = amqp_cstring_bytes("capabilities");
      entries[1].value.kind = AMQP_FIELD_KIND_TABLE;
      entries[1].value.value.table = {4, capabilities_entries};
      table = {2, entries};
    }
    static amqp_table_entry_t Entry(const char* name, bool value) {
      amqp_table_entry_t entry{};
      entry.key = amqp_cstring_bytes(name);
      entry.value.kind = AMQP_FIELD_KIND_BOOLEAN;
      entry.value.value.boolean = value ? 1 : 0;
      return entry;
    }
    amqp_table_entry_t capabilities_entries[4];
    amqp_table_entry_t entries[2];
    amqp_table_t table;
  };

  const EndpointOptions options_;
  const BrokerUrl url_;
  const std::string vhost_;
  const int wake_;  // eventfd: a caller handed over work, or the sink is closing

  std::mutex mutex_;
  std::deque<std::shared_ptr<Publication>> queue_;  // handed over, not yet sent; GUARDED_BY(mutex_)
  std::set<Publication*> waiting_;  // whose callers wait (for AbortAll); GUARDED_BY(mutex_)
  bool aborted_ = false;            // GUARDED_BY(mutex_)
  // The broker's reason while it blocks the connection, else "";
  // GUARDED_BY(mutex_).
  std::string blocked_;

  // The I/O thread's alone.
  amqp_connection_state_t connection_ = nullptr;
  std::uint64_t next_tag_ = 1;
  InFlight in_flight_;

  std::once_flag start_once_;
  std::jthread io_;  // last: joined before the members it uses go
};

}  // namespace

std::unique_ptr<Sink> MakeAmqpSink(EndpointOptions options) {
  return std::make_unique<AmqpSink>(std::move(options));
}

}  // namespace outbox::transport::internal
