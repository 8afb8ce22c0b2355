// The MQTT sink: QoS 1 publishes over one long-lived connection per sink;
// the broker's PUBACK (and, with MQTT 5, its reason code) is the outcome.
#include <mosquitto.h>
#include <mqtt_protocol.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <optional>
#include <set>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "internal.h"
#include "outbox/transport.h"
#include "util/clock.h"
#include "util/utf8.h"

namespace outbox::transport::internal {
namespace {

// libmosquitto's global state, set up once and never torn down (like
// libcurl's: a cleanup at exit would race other static destructors).
void EnsureMosquittoInitialized() {
  static std::once_flag once;
  std::call_once(once, [] { mosquitto_lib_init(); });
}

// The refusals of mosquitto_publish_v5 itself, before anything is sent.
Result ClassifyPublishError(int code) {
  const std::string error = std::string("mosquitto: ") + mosquitto_strerror(code);
  switch (code) {
    case MOSQ_ERR_OVERSIZE_PACKET:  // above the broker's maximum packet size
    case MOSQ_ERR_PAYLOAD_SIZE:
    case MOSQ_ERR_INVAL:            // e.g. a topic its placeholders made invalid
    case MOSQ_ERR_MALFORMED_UTF8:
      return MessageFailure(error);
    default:
      return EndpointFailure(error);
  }
}

bool IsAuthenticationRefusal(int reason) {
  // MQTT 5 reason codes and the MQTT 3.1.1 CONNACK return codes 4 and 5.
  return reason == MQTT_RC_BAD_USERNAME_OR_PASSWORD || reason == MQTT_RC_NOT_AUTHORIZED ||
         reason == MQTT_RC_BANNED || reason == MQTT_RC_BAD_AUTHENTICATION_METHOD ||
         reason == 4 || reason == 5;
}

// A topic name after the placeholders are filled in, or nullopt when the
// message's values make it one MQTT does not allow.
std::optional<std::string> ExpandTopic(std::string_view pattern, const Message& message) {
  std::string topic = ExpandPlaceholders(pattern, message);
  if (topic.empty() || topic.size() > 65535 || topic.find_first_of("+#") != std::string::npos ||
      topic.find('\0') != std::string::npos || !util::IsValidUtf8(topic)) {
    return std::nullopt;
  }
  return topic;
}

struct PropertiesDeleter {
  void operator()(mosquitto_property* properties) const {
    mosquitto_property_free_all(&properties);
  }
};
using Properties = std::unique_ptr<mosquitto_property, PropertiesDeleter>;

class MqttSink final : public BrokerSink {
 public:
  explicit MqttSink(EndpointOptions options)
      : BrokerSink(options.batch.max_messages),
        options_(std::move(options)),
        url_(ParseBrokerUrl(options_.url)) {
    EnsureMosquittoInitialized();
    const MqttOptions& mqtt = options_.mqtt;
    // Clean start: the outbox keeps the state, not the broker's session.
    mosq_ = mosquitto_new(mqtt.client_id.empty() ? nullptr : mqtt.client_id.c_str(), true, this);
    if (mosq_ == nullptr) throw std::bad_alloc();
    int rc = mosquitto_int_option(
        mosq_, MOSQ_OPT_PROTOCOL_VERSION,
        mqtt.protocol_version == 5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311);
    if (rc == MOSQ_ERR_SUCCESS && !mqtt.username.empty()) {
      rc = mosquitto_username_pw_set(mosq_, mqtt.username.c_str(),
                                     mqtt.password.empty() ? nullptr : mqtt.password.c_str());
    }
    if (rc == MOSQ_ERR_SUCCESS) rc = mosquitto_reconnect_delay_set(mosq_, 1, 30, true);
    if (rc == MOSQ_ERR_SUCCESS && url_.tls) rc = ConfigureTls();
    if (rc != MOSQ_ERR_SUCCESS) {
      mosquitto_destroy(mosq_);
      throw std::invalid_argument(std::string("mqtt: ") + mosquitto_strerror(rc));
    }
    mosquitto_connect_v5_callback_set(mosq_, &MqttSink::OnConnect);
    mosquitto_disconnect_v5_callback_set(mosq_, &MqttSink::OnDisconnect);
    mosquitto_publish_v5_callback_set(mosq_, &MqttSink::OnPublish);
  }

  ~MqttSink() override {
    if (started_) {
      mosquitto_disconnect(mosq_);
      // Joins libmosquitto's network thread (it leaves its reconnect wait
      // when told to stop).
      mosquitto_loop_stop(mosq_, false);
    }
    mosquitto_destroy(mosq_);
  }

  MqttSink(const MqttSink&) = delete;
  MqttSink& operator=(const MqttSink&) = delete;

  SinkKind kind() const override { return SinkKind::kMqtt; }

  void AbortAll() override {
    const std::lock_guard lock(mutex_);
    aborted_ = true;
    NotifyAll();
  }

  void ResetAbort() override {
    const std::lock_guard lock(mutex_);
    aborted_ = false;
  }

 private:
  // What the broker said about one publish; filled in by OnPublish.
  struct Pending {
    bool done = false;
    int reason = 0;
    // Its waiter alone is woken for its PUBACK (eight waiters woken per
    // PUBACK cost a third of the throughput).
    std::condition_variable answered;
  };

  int ConfigureTls() {
    const TlsOptions& tls = options_.tls;
    const char* cert = tls.client_cert_file.empty() ? nullptr : tls.client_cert_file.c_str();
    const char* key = tls.client_key_file.empty() ? cert : tls.client_key_file.c_str();
    int rc = mosquitto_tls_set(mosq_, tls.ca_file.empty() ? nullptr : tls.ca_file.c_str(),
                               tls.ca_file.empty() ? "/etc/ssl/certs" : nullptr, cert, key,
                               nullptr);
    if (rc == MOSQ_ERR_SUCCESS && tls.insecure_skip_verify) {
      rc = mosquitto_tls_opts_set(mosq_, 0 /* SSL_VERIFY_NONE */, nullptr, nullptr);
      if (rc == MOSQ_ERR_SUCCESS) rc = mosquitto_tls_insecure_set(mosq_, true);
    }
    return rc;
  }

  Result Publish(const Message& message) override {
    std::string body;
    Headers headers;
    try {
      body = BuildBody(options_, message);
      headers = BuildHeaders(options_, message, body, util::NowMs() / 1000);
    } catch (const std::invalid_argument& error) {
      return MessageFailure(error.what());
    }
    const std::optional<std::string> topic = ExpandTopic(url_.path, message);
    if (!topic) return MessageFailure("MQTT topic name invalid after filling in placeholders");
    if (body.size() > 268'435'455) return MessageFailure("message is larger than MQTT allows");
    Properties properties;
    if (options_.mqtt.protocol_version == 5) {
      properties = BuildProperties(headers);
      if (!properties && !headers.empty()) {
        return MessageFailure("headers: not valid as MQTT user properties (UTF-8)");
      }
    }

    // No libmosquitto call is made under mutex_: libmosquitto holds its own
    // locks while it calls OnConnect/OnPublish, which take mutex_.
    std::call_once(start_once_, [this] { Start(); });
    std::unique_lock lock(mutex_);
    if (aborted_) return EndpointFailure("aborted");
    if (!connected_ && !settled_) {
      // The first connection is being made: wait for its outcome.
      changed_.wait_for(lock, std::chrono::milliseconds(options_.connect_timeout_ms),
                        [&] { return connected_ || settled_ || aborted_; });
    }
    if (aborted_) return EndpointFailure("aborted");
    if (!connected_) {
      return EndpointFailure("not connected to the MQTT broker" +
                                 (last_refusal_.empty() ? "" : ": " + last_refusal_),
                             refused_for_credentials_);
    }
    const std::uint64_t connection = connection_;
    lock.unlock();
    int mid = 0;
    const int rc = mosquitto_publish_v5(mosq_, &mid, topic->c_str(), static_cast<int>(body.size()),
                                        body.data(), 1, false, properties.get());
    if (rc != MOSQ_ERR_SUCCESS) return ClassifyPublishError(rc);
    lock.lock();
    // The PUBACK may have come already: OnPublish then left the entry done.
    Pending& pending = pending_[mid];
    const bool answered =
        pending.answered.wait_for(lock, std::chrono::milliseconds(options_.timeout_ms), [&] {
          return pending.done || aborted_ || connection_ != connection;
        });
    const bool done = pending.done;
    const int reason = pending.reason;
    const bool aborted = aborted_;
    pending_.erase(mid);
    // A PUBACK that may still come finds no waiter: OnPublish drops it.
    if (!done) abandoned_.insert(mid);
    lock.unlock();

    Result result;
    if (done) {
      result = ClassifyMqttReasonCode(reason);
    } else if (aborted) {
      result = EndpointFailure("aborted");
    } else if (!answered) {
      result = EndpointFailure("timeout waiting for the PUBACK");
    } else {
      // libmosquitto sends it again after reconnecting; the agent's resend
      // carries the same idempotency key.
      result = EndpointFailure("connection to the MQTT broker lost before the PUBACK");
    }
    result.request_bytes = body.size();
    return result;
  }

  // Content type and user properties; null when a header cannot be one.
  static Properties BuildProperties(const Headers& headers) {
    mosquitto_property* list = nullptr;
    Properties owned;
    for (const auto& [name, value] : headers) {
      int rc = MOSQ_ERR_SUCCESS;
      if (EqualsIgnoreCase(name, "Content-Type")) {
        rc = mosquitto_property_add_string(&list, MQTT_PROP_CONTENT_TYPE, value.c_str());
      } else {
        // MQTT has no header names; lowercase ones read like HTTP/2's.
        std::string key = EqualsIgnoreCase(name, "Idempotency-Key") ? "idempotency-key" : name;
        rc = mosquitto_property_add_string_pair(&list, MQTT_PROP_USER_PROPERTY, key.c_str(),
                                                value.c_str());
      }
      owned.release();
      owned.reset(list);
      if (rc != MOSQ_ERR_SUCCESS) return nullptr;
    }
    return owned;
  }

  // Once, not under mutex_. Starts libmosquitto's network thread, which
  // connects and reconnects for as long as the sink lives.
  void Start() {
    started_ = true;
    const int rc = mosquitto_connect_async(mosq_, url_.host.c_str(), url_.port,
                                           options_.mqtt.keepalive_s);
    if (rc != MOSQ_ERR_SUCCESS) {
      const std::lock_guard lock(mutex_);
      settled_ = true;
      last_refusal_ = mosquitto_strerror(rc);
    }
    // The thread retries a failed first connect as it does a lost one.
    if (mosquitto_loop_start(mosq_) != MOSQ_ERR_SUCCESS) {
      throw std::runtime_error("mqtt: cannot start libmosquitto's network thread");
    }
  }

  // libmosquitto callbacks, on its network thread: C, so nothing may throw.

  static void OnConnect(mosquitto* /*mosq*/, void* self, int reason, int /*flags*/,
                        const mosquitto_property* /*properties*/) {
    auto* sink = static_cast<MqttSink*>(self);
    const std::lock_guard lock(sink->mutex_);
    sink->settled_ = true;
    sink->connected_ = reason == 0;
    sink->refused_for_credentials_ = IsAuthenticationRefusal(reason);
    sink->last_refusal_ = reason == 0 ? "" : std::string("broker refused the connection: ") +
                                                 (sink->options_.mqtt.protocol_version == 5
                                                      ? mosquitto_reason_string(reason)
                                                      : mosquitto_connack_string(reason));
    ++sink->connection_;
    sink->NotifyAll();
  }

  static void OnDisconnect(mosquitto* /*mosq*/, void* self, int reason,
                           const mosquitto_property* /*properties*/) {
    auto* sink = static_cast<MqttSink*>(self);
    const std::lock_guard lock(sink->mutex_);
    sink->settled_ = true;
    sink->connected_ = false;
    if (reason != 0 && sink->last_refusal_.empty()) {
      sink->last_refusal_ = "connection lost";
    }
    ++sink->connection_;
    sink->NotifyAll();
  }

  static void OnPublish(mosquitto* /*mosq*/, void* self, int mid, int reason,
                        const mosquitto_property* /*properties*/) {
    auto* sink = static_cast<MqttSink*>(self);
    const std::lock_guard lock(sink->mutex_);
    // A PUBACK nobody waits for any more (timed out, or resent after a
    // reconnect) has no one to tell. One for a publish whose caller has not
    // registered yet is kept for it.
    const auto found = sink->pending_.find(mid);
    if (found == sink->pending_.end()) {
      if (sink->abandoned_.erase(mid) == 0) {
        Pending& early = sink->pending_[mid];
        early.done = true;
        early.reason = reason;
      }
      return;
    }
    found->second.done = true;
    found->second.reason = reason;
    found->second.answered.notify_one();
  }

  // Under mutex_: wakes every waiter (connection state or abort changed).
  void NotifyAll() {
    changed_.notify_all();
    for (auto& [mid, pending] : pending_) pending.answered.notify_one();
  }

  const EndpointOptions options_;
  const BrokerUrl url_;
  mosquitto* mosq_ = nullptr;
  std::mutex mutex_;
  std::condition_variable changed_;  // connection state or abort changed
  std::once_flag start_once_;
  std::atomic<bool> started_{false};  // Start() ran (for the destructor)
  bool connected_ = false;           // GUARDED_BY(mutex_)
  bool settled_ = false;  // a connect attempt has had an answer; GUARDED_BY(mutex_)
  bool refused_for_credentials_ = false;  // GUARDED_BY(mutex_)
  std::string last_refusal_;              // GUARDED_BY(mutex_)
  std::uint64_t connection_ = 0;  // counts connects and disconnects; GUARDED_BY(mutex_)
  bool aborted_ = false;          // GUARDED_BY(mutex_)
  std::map<int, Pending> pending_;  // by message id; GUARDED_BY(mutex_)
  // Message ids whose waiter gave up before the PUBACK; GUARDED_BY(mutex_).
  std::set<int> abandoned_;
};

}  // namespace

std::unique_ptr<Sink> MakeMqttSink(EndpointOptions options) {
  return std::make_unique<MqttSink>(std::move(options));
}

}  // namespace outbox::transport::internal

namespace outbox::transport {

// docs/design.md's outcome rules read for MQTT 5: the broker's state (quota,
// permissions, its own errors) is an endpoint failure; what is wrong with
// this publish is a message failure.
Result ClassifyMqttReasonCode(int reason_code) {
  Result result;
  if (reason_code >= 0 && reason_code < 0x80) {
    result.outcome = Outcome::kDelivered;
    return result;
  }
  const char* name = mosquitto_reason_string(reason_code);
  const std::string error = "MQTT reason " + std::to_string(reason_code) + " (" +
                            (name != nullptr ? name : "unknown") + ")";
  switch (reason_code) {
    case MQTT_RC_PAYLOAD_FORMAT_INVALID:
    case MQTT_RC_PACKET_TOO_LARGE:
    case MQTT_RC_TOPIC_NAME_INVALID:
      return internal::MessageFailure(error);
    case MQTT_RC_NOT_AUTHORIZED:
      return internal::EndpointFailure(error, true);
    default:
      // Quota exceeded, implementation specific error, unspecified error
      // and whatever a broker invents: retry later.
      return internal::EndpointFailure(error);
  }
}

}  // namespace outbox::transport
