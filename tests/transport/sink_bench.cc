// sink_bench: messages per second through the broker sinks beside raw client
// loops doing the same publishes with the same concurrency, against a local
// nats-server (JetStream, memory stream) and a local mosquitto that this
// program starts and stops.
//
//   sink_bench [repetitions=5] [messages_per_repetition=4000]
//
// Each comparison runs its two sides back to back, alternating which goes
// first; the table shows median rates and the median of the per-repetition
// ratios. Not a ctest test.
#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <nats/nats.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "broker_servers.h"
#include "outbox/transport.h"

namespace {

namespace transport = outbox::transport;
using SteadyClock = std::chrono::steady_clock;

constexpr int kConcurrency = 8;
constexpr char kPayload[] =
    R"({"order_id":"A-1024","customer":"c-77","items":[{"sku":"X1","qty":2},)"
    R"({"sku":"Y9","qty":1}],"total_cents":4599,"currency":"EUR"})";

void Check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(what);
}

// Distinct ids per run, so that JetStream's deduplication never drops one.
std::vector<std::string> Ids(int run, int count) {
  std::vector<std::string> ids;
  for (int i = 0; i < count; ++i) {
    ids.push_back(transport::MessageId("bench", "orders", std::to_string(run) + "/" + std::to_string(i)));
  }
  return ids;
}

// kConcurrency threads taking messages off one counter.
double Rate(int count, const std::function<void(int)>& send) {
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  const auto start = SteadyClock::now();
  {
    std::vector<std::jthread> workers;
    for (int w = 0; w < kConcurrency; ++w) {
      workers.emplace_back([&] {
        try {
          for (int i = next++; i < count; i = next++) send(i);
        } catch (...) {  // nothing may escape a thread
          failed = true;
        }
      });
    }
  }
  Check(!failed, "a publish failed");
  return count / std::chrono::duration<double>(SteadyClock::now() - start).count();
}

double SinkRate(transport::Sink& sink, const std::vector<std::string>& ids) {
  return Rate(static_cast<int>(ids.size()), [&](int i) {
    const transport::Result result =
        sink.Push({.message_id = ids[static_cast<std::size_t>(i)], .topic = "orders", .payload = kPayload});
    Check(result.outcome == transport::Outcome::kDelivered, "sink publish failed");
  });
}

// --- NATS ---------------------------------------------------------------

struct RawNats {
  explicit RawNats(int port) {
    const std::string url = "nats://127.0.0.1:" + std::to_string(port);
    Check(natsConnection_ConnectTo(&connection, url.c_str()) == NATS_OK, "nats connect");
    Check(natsConnection_JetStream(&js, connection, nullptr) == NATS_OK, "jetstream");
    jsStreamConfig config;
    jsStreamConfig_Init(&config);
    config.Name = "BENCH";
    const char* subjects[] = {"bench"};
    config.Subjects = subjects;
    config.SubjectsLen = 1;
    config.Storage = js_MemoryStorage;
    jsStreamInfo* info = nullptr;
    Check(js_AddStream(&info, js, &config, nullptr, nullptr) == NATS_OK, "add stream");
    jsStreamInfo_Destroy(info);
  }
  ~RawNats() {
    jsCtx_Destroy(js);
    natsConnection_Destroy(connection);
  }
  // The same publish as the sink: the payload with Nats-Msg-Id and a
  // Content-Type, waiting for the acknowledgement.
  void Publish(const std::string& id) const {
    natsMsg* msg = nullptr;
    natsMsg_Create(&msg, "bench", nullptr, kPayload, sizeof kPayload - 1);
    natsMsgHeader_Set(msg, "Nats-Msg-Id", id.c_str());
    natsMsgHeader_Set(msg, "Content-Type", "application/json");
    jsPubOptions options;
    jsPubOptions_Init(&options);
    options.MsgId = id.c_str();
    jsPubAck* ack = nullptr;
    const natsStatus status = js_PublishMsg(&ack, js, msg, &options, nullptr);
    natsMsg_Destroy(msg);
    jsPubAck_Destroy(ack);
    Check(status == NATS_OK, "raw nats publish failed");
  }
  natsConnection* connection = nullptr;
  jsCtx* js = nullptr;
};

// --- MQTT ---------------------------------------------------------------

// One libmosquitto connection, QoS 1, each of kConcurrency threads waiting
// for its own PUBACK: the least a client with that many in flight does.
class RawMqtt {
 public:
  explicit RawMqtt(int port) {
    mosq_ = mosquitto_new(nullptr, true, this);
    mosquitto_int_option(mosq_, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_publish_v5_callback_set(mosq_, &RawMqtt::OnPublish);
    // The same properties as the sink sends (one id for all: the broker
    // does not look at it).
    mosquitto_property_add_string(&properties_, MQTT_PROP_CONTENT_TYPE, "application/json");
    mosquitto_property_add_string_pair(&properties_, MQTT_PROP_USER_PROPERTY, "idempotency-key",
                                       transport::MessageId("bench", "orders", "raw").c_str());
    Check(mosquitto_connect(mosq_, "127.0.0.1", port, 30) == MOSQ_ERR_SUCCESS, "mqtt connect");
    Check(mosquitto_loop_start(mosq_) == MOSQ_ERR_SUCCESS, "mqtt loop");
  }
  ~RawMqtt() {
    mosquitto_disconnect(mosq_);
    mosquitto_loop_stop(mosq_, false);
    mosquitto_destroy(mosq_);
    mosquitto_property_free_all(&properties_);
  }
  void Publish() {
    std::unique_lock lock(mutex_);
    int mid = 0;
    Check(mosquitto_publish_v5(mosq_, &mid, "bench", sizeof kPayload - 1, kPayload, 1, false,
                               properties_) == MOSQ_ERR_SUCCESS,
          "raw mqtt publish failed");
    Waiter& waiter = waiters_[mid];
    waiter.answered.wait(lock, [&] { return waiter.done; });
    waiters_.erase(mid);
  }

 private:
  // Each thread waits for its own PUBACK and only it is woken.
  struct Waiter {
    bool done = false;
    std::condition_variable answered;
  };
  static void OnPublish(mosquitto*, void* self, int mid, int, const mosquitto_property*) {
    auto* raw = static_cast<RawMqtt*>(self);
    const std::lock_guard lock(raw->mutex_);
    Waiter& waiter = raw->waiters_[mid];
    waiter.done = true;
    waiter.answered.notify_one();
  }
  mosquitto* mosq_ = nullptr;
  mosquitto_property* properties_ = nullptr;
  std::mutex mutex_;
  std::map<int, Waiter> waiters_;
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The target of issue 18: a sink at 0.6x its raw client or better.
constexpr double kTargetRatio = 0.6;

// One table line, and one "@row" line for packaging/bench.sh.
void Report(const char* name, const std::vector<double>& ours, const std::vector<double>& raw) {
  std::vector<double> ratios;
  for (std::size_t i = 0; i < ours.size(); ++i) ratios.push_back(ours[i] / raw[i]);
  std::printf("| %-36s | %9.0f msg/s | %9.0f msg/s | %5.2f |\n", name, Median(ours), Median(raw),
              Median(ratios));
  std::printf("@row\t9 sink: %s, vs the raw client\t%.0f msg/s\t%.0f msg/s\t%.2f\t>= %.1f\t%s\n",
              name, Median(ours), Median(raw), Median(ratios), kTargetRatio,
              Median(ratios) >= kTargetRatio ? "yes" : "NO");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
    const int count = argc > 2 ? std::atoi(argv[2]) : 4000;
    Check(reps > 0 && count > 0, "usage: sink_bench [repetitions] [messages]");
    mosquitto_lib_init();

    outbox::transport::testing::NatsServer nats;
    RawNats raw_nats(nats.port());
    transport::EndpointOptions nats_options;
    nats_options.url = nats.Url("bench");
    const std::unique_ptr<transport::Sink> nats_sink = transport::MakeSink(nats_options);

    outbox::transport::testing::MosquittoServer mosquitto;
    RawMqtt raw_mqtt(mosquitto.port());
    transport::EndpointOptions mqtt_options;
    mqtt_options.url = mosquitto.Url("bench");
    const std::unique_ptr<transport::Sink> mqtt_sink = transport::MakeSink(mqtt_options);

    std::vector<double> nats_ours, nats_raw, mqtt_ours, mqtt_raw;
    int run = 0;
    for (int rep = 0; rep < reps; ++rep) {
      const bool ours_first = rep % 2 == 0;
      for (int side = 0; side < 2; ++side) {
        const std::vector<std::string> ids = Ids(run++, count);
        if ((side == 0) == ours_first) {
          nats_ours.push_back(SinkRate(*nats_sink, ids));
          mqtt_ours.push_back(SinkRate(*mqtt_sink, ids));
        } else {
          nats_raw.push_back(Rate(count, [&](int i) { raw_nats.Publish(ids[static_cast<std::size_t>(i)]); }));
          mqtt_raw.push_back(Rate(count, [&](int) { raw_mqtt.Publish(); }));
        }
      }
    }
    std::printf("%d repetitions of %d messages, %d threads, %u cores\n\n", reps, count,
                kConcurrency, std::thread::hardware_concurrency());
    std::printf("| %-36s | %15s | %15s | %5s |\n", "figure", "sink", "raw client", "ratio");
    std::printf("|%s|%s|%s|%s|\n", std::string(38, '-').c_str(), std::string(17, '-').c_str(),
                std::string(17, '-').c_str(), std::string(7, '-').c_str());
    Report("NATS JetStream publish, 8 in flight", nats_ours, nats_raw);
    Report("MQTT 5 QoS 1 publish, 8 in flight", mqtt_ours, mqtt_raw);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "sink_bench: %s\n", error.what());
    return 1;
  }
}
