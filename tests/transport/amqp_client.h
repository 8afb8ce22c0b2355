// The test's own AMQP 0-9-1 client (rabbitmq-c) for what the sink does not
// do: declaring queues, exchanges and bindings, and reading back what
// arrived. Throws std::runtime_error naming the step that failed.
#pragma once

#include <amqp.h>
#include <amqp_tcp_socket.h>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace outbox::transport::testing {

// One message as it arrived in a queue.
struct ReceivedAmqp {
  std::string body;
  std::string message_id;
  std::string type;
  std::string content_type;
  std::uint8_t delivery_mode = 0;
  std::uint64_t timestamp = 0;
  std::map<std::string, std::string> headers;  // the string-valued ones
};

class AmqpClient {
 public:
  explicit AmqpClient(int port) : connection_(amqp_new_connection()) {
    amqp_socket_t* socket = amqp_tcp_socket_new(connection_);
    if (socket == nullptr || amqp_socket_open(socket, "127.0.0.1", port) != AMQP_STATUS_OK) {
      amqp_destroy_connection(connection_);
      throw std::runtime_error("test client: cannot connect");
    }
    Check(amqp_login(connection_, "/", 1, 131072, 0, AMQP_SASL_METHOD_PLAIN, "guest", "guest"),
          "login");
    amqp_channel_open(connection_, 1);
    Check(amqp_get_rpc_reply(connection_), "channel.open");
  }
  ~AmqpClient() {
    amqp_channel_close(connection_, 1, AMQP_REPLY_SUCCESS);
    amqp_connection_close(connection_, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(connection_);
  }
  AmqpClient(const AmqpClient&) = delete;
  AmqpClient& operator=(const AmqpClient&) = delete;

  // A durable queue (classic); its message count.
  std::uint32_t DeclareQueue(const std::string& queue, bool passive = false) {
    const amqp_queue_declare_ok_t* ok = amqp_queue_declare(
        connection_, 1, amqp_cstring_bytes(queue.c_str()), passive ? 1 : 0, 1, 0, 0,
        amqp_empty_table);
    Check(amqp_get_rpc_reply(connection_), "queue.declare");
    return ok->message_count;
  }
  std::uint32_t Count(const std::string& queue) { return DeclareQueue(queue, true); }

  void DeclareExchange(const std::string& exchange, const std::string& type = "direct") {
    amqp_exchange_declare(connection_, 1, amqp_cstring_bytes(exchange.c_str()),
                          amqp_cstring_bytes(type.c_str()), 0, 1, 0, 0, amqp_empty_table);
    Check(amqp_get_rpc_reply(connection_), "exchange.declare");
  }

  void Bind(const std::string& queue, const std::string& exchange, const std::string& key) {
    amqp_queue_bind(connection_, 1, amqp_cstring_bytes(queue.c_str()),
                    amqp_cstring_bytes(exchange.c_str()), amqp_cstring_bytes(key.c_str()),
                    amqp_empty_table);
    Check(amqp_get_rpc_reply(connection_), "queue.bind");
  }

  void Purge(const std::string& queue) {
    amqp_queue_purge(connection_, 1, amqp_cstring_bytes(queue.c_str()));
    Check(amqp_get_rpc_reply(connection_), "queue.purge");
  }

  // Takes every message in `queue` (basic.get, acknowledged) until it is
  // empty.
  std::vector<ReceivedAmqp> Drain(const std::string& queue) {
    std::vector<ReceivedAmqp> received;
    while (true) {
      const amqp_rpc_reply_t reply =
          amqp_basic_get(connection_, 1, amqp_cstring_bytes(queue.c_str()), 1);
      Check(reply, "basic.get");
      if (reply.reply.id == AMQP_BASIC_GET_EMPTY_METHOD) return received;
      amqp_message_t message;
      Check(amqp_read_message(connection_, 1, &message, 0), "reading a message");
      received.push_back(Convert(message));
      amqp_destroy_message(&message);
      amqp_maybe_release_buffers(connection_);
    }
  }

 private:
  static std::string Text(amqp_bytes_t bytes) {
    return std::string(static_cast<const char*>(bytes.bytes), bytes.len);
  }

  static ReceivedAmqp Convert(const amqp_message_t& message) {
    ReceivedAmqp out;
    const amqp_basic_properties_t& p = message.properties;
    out.body = Text(message.body);
    if (p._flags & AMQP_BASIC_MESSAGE_ID_FLAG) out.message_id = Text(p.message_id);
    if (p._flags & AMQP_BASIC_TYPE_FLAG) out.type = Text(p.type);
    if (p._flags & AMQP_BASIC_CONTENT_TYPE_FLAG) out.content_type = Text(p.content_type);
    if (p._flags & AMQP_BASIC_DELIVERY_MODE_FLAG) out.delivery_mode = p.delivery_mode;
    if (p._flags & AMQP_BASIC_TIMESTAMP_FLAG) out.timestamp = p.timestamp;
    if (p._flags & AMQP_BASIC_HEADERS_FLAG) {
      for (int i = 0; i < p.headers.num_entries; ++i) {
        const amqp_table_entry_t& entry = p.headers.entries[i];
        if (entry.value.kind == AMQP_FIELD_KIND_UTF8 || entry.value.kind == AMQP_FIELD_KIND_BYTES) {
          out.headers[Text(entry.key)] = Text(entry.value.value.bytes);
        }
      }
    }
    return out;
  }

  static void Check(const amqp_rpc_reply_t& reply, const char* step) {
    if (reply.reply_type != AMQP_RESPONSE_NORMAL) {
      throw std::runtime_error(std::string("test client: ") + step + " failed");
    }
  }

  amqp_connection_state_t connection_;
};

}  // namespace outbox::transport::testing
