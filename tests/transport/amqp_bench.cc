// amqp_bench: messages per second through the AMQP sink (8 callers, so 8 in
// flight on its channel) beside a raw rabbitmq-c loop publishing the same
// messages with the same properties, mandatory and persistent, in confirm
// mode with 8 in flight, into a durable queue of a rabbitmq-server this
// program starts and stops.
//
//   amqp_bench [repetitions=5] [messages_per_repetition=3000]
//
// The two sides run back to back, alternating which goes first; the table
// shows median rates and the median of the per-repetition ratios, and one
// "@row" line for packaging/bench.sh. Not a ctest test.
#include <amqp.h>
#include <amqp_tcp_socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "amqp_client.h"
#include "outbox/transport.h"
#include "rabbit_server.h"

namespace {

namespace transport = outbox::transport;
using SteadyClock = std::chrono::steady_clock;

constexpr int kInFlight = 8;
constexpr char kQueue[] = "bench";
constexpr char kPayload[] =
    R"({"order_id":"A-1024","customer":"c-77","items":[{"sku":"X1","qty":2},)"
    R"({"sku":"Y9","qty":1}],"total_cents":4599,"currency":"EUR"})";

void Check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(what);
}

std::vector<std::string> Ids(int run, int count) {
  std::vector<std::string> ids;
  for (int i = 0; i < count; ++i) {
    ids.push_back(
        transport::MessageId("bench", "orders", std::to_string(run) + "/" + std::to_string(i)));
  }
  return ids;
}

double Seconds(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

double SinkRate(transport::Sink& sink, const std::vector<std::string>& ids) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  const auto start = SteadyClock::now();
  {
    std::vector<std::jthread> callers;
    for (int c = 0; c < kInFlight; ++c) {
      callers.emplace_back([&] {
        for (std::size_t i = next++; i < ids.size(); i = next++) {
          const transport::Result result = sink.Push(
              {.message_id = ids[i], .topic = "orders", .payload = kPayload, .created_at_ms = 1});
          if (result.outcome != transport::Outcome::kDelivered) failed = true;
        }
      });
    }
  }
  Check(!failed, "a sink publish failed");
  return static_cast<double>(ids.size()) / Seconds(start);
}

// One connection, one thread, confirm mode: keeps kInFlight publishes
// outstanding and reads the acks as they come.
class RawAmqp {
 public:
  explicit RawAmqp(int port) : connection_(amqp_new_connection()) {
    amqp_socket_t* socket = amqp_tcp_socket_new(connection_);
    Check(amqp_socket_open(socket, "127.0.0.1", port) == AMQP_STATUS_OK, "raw connect");
    Check(amqp_login(connection_, "/", 1, 131072, 30, AMQP_SASL_METHOD_PLAIN, "guest", "guest")
                  .reply_type == AMQP_RESPONSE_NORMAL,
          "raw login");
    amqp_channel_open(connection_, 1);
    Check(amqp_get_rpc_reply(connection_).reply_type == AMQP_RESPONSE_NORMAL, "raw channel");
    amqp_confirm_select(connection_, 1);
    Check(amqp_get_rpc_reply(connection_).reply_type == AMQP_RESPONSE_NORMAL, "raw confirms");
  }
  ~RawAmqp() {
    amqp_channel_close(connection_, 1, AMQP_REPLY_SUCCESS);
    amqp_connection_close(connection_, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(connection_);
  }

  double Rate(const std::vector<std::string>& ids) {
    const auto start = SteadyClock::now();
    std::size_t sent = 0;  // an index into ids
    std::uint64_t acked = 0;
    while (acked < ids.size()) {
      while (sent < ids.size() && sent - acked < kInFlight) Publish(ids[sent++]);
      amqp_frame_t frame;
      Check(amqp_simple_wait_frame(connection_, &frame) == AMQP_STATUS_OK, "raw wait");
      if (frame.frame_type != AMQP_FRAME_METHOD) continue;
      Check(frame.payload.method.id == AMQP_BASIC_ACK_METHOD, "raw: not an ack");
      // One queue confirms in order: the highest tag says how many are in.
      const std::uint64_t tag =
          static_cast<const amqp_basic_ack_t*>(frame.payload.method.decoded)->delivery_tag;
      acked = std::max(acked, tag - earlier_tags_);
      amqp_maybe_release_buffers(connection_);
    }
    earlier_tags_ += ids.size();
    return static_cast<double>(ids.size()) / Seconds(start);
  }

 private:
  void Publish(const std::string& id) {
    amqp_basic_properties_t properties{};
    properties._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
                        AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_TIMESTAMP_FLAG |
                        AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_APP_ID_FLAG;
    properties.content_type = amqp_cstring_bytes("application/json");
    properties.delivery_mode = AMQP_DELIVERY_PERSISTENT;
    properties.message_id = amqp_cstring_bytes(id.c_str());
    properties.timestamp = 1;
    properties.type = amqp_cstring_bytes("orders");
    properties.app_id = amqp_cstring_bytes("edge-outbox");
    Check(amqp_basic_publish(connection_, 1, amqp_empty_bytes, amqp_cstring_bytes(kQueue), 1, 0,
                             &properties, amqp_cstring_bytes(kPayload)) == AMQP_STATUS_OK,
          "raw publish");
  }

  amqp_connection_state_t connection_;
  std::uint64_t earlier_tags_ = 0;  // delivery tags used by earlier runs
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

constexpr double kTargetRatio = 0.6;  // issue 30

}  // namespace

int main(int argc, char** argv) {
  try {
    const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
    const int count = argc > 2 ? std::atoi(argv[2]) : 3000;
    Check(reps > 0 && count > 0, "usage: amqp_bench [repetitions] [messages]");
    outbox::transport::testing::RabbitServer broker;
    std::fprintf(stderr, "rabbitmq-server started in %lld ms\n",
                 static_cast<long long>(broker.start_time().count()));
    outbox::transport::testing::AmqpClient admin(broker.port());
    admin.DeclareQueue(kQueue);
    RawAmqp raw(broker.port());
    transport::EndpointOptions options;
    options.url = broker.Url();
    options.amqp.queue = kQueue;
    const std::unique_ptr<transport::Sink> sink = transport::MakeSink(options);

    std::vector<double> ours, theirs, ratios;
    int run = 0;
    for (int rep = 0; rep < reps; ++rep) {
      double a = 0, b = 0;
      for (int side = 0; side < 2; ++side) {
        const std::vector<std::string> ids = Ids(run++, count);
        if ((side == 0) == (rep % 2 == 0)) {
          a = SinkRate(*sink, ids);
        } else {
          b = raw.Rate(ids);
        }
        admin.Purge(kQueue);
      }
      ours.push_back(a);
      theirs.push_back(b);
      ratios.push_back(a / b);
    }
    std::printf("%d repetitions of %d messages, %d in flight, %u cores\n\n", reps, count,
                kInFlight, std::thread::hardware_concurrency());
    std::printf("| %-36s | %9.0f msg/s | %9.0f msg/s | %5.2f |\n",
                "AMQP confirmed publish, 8 in flight", Median(ours), Median(theirs),
                Median(ratios));
    std::printf("@row\t9 sink: AMQP confirmed publish, 8 in flight, vs raw rabbitmq-c\t%.0f "
                "msg/s\t%.0f msg/s\t%.2f\t>= %.1f\t%s\n",
                Median(ours), Median(theirs), Median(ratios), kTargetRatio,
                Median(ratios) >= kTargetRatio ? "yes" : "NO");
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "amqp_bench: %s\n", error.what());
    return 1;
  }
}
