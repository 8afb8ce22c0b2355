// An MQTT 5 subscriber of the tests' own (libmosquitto, QoS 1) that collects
// what arrives, for checking what a sink published.
#pragma once

#include <gtest/gtest.h>
#include <mosquitto.h>
#include <mqtt_protocol.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "broker_servers.h"

namespace outbox::transport::testing {

// A subscriber of the test's own (MQTT 5, QoS 1) collecting what arrives.
class Subscriber {
 public:
  struct Received {
    std::string topic;
    std::string payload;
    std::string content_type;
    std::multimap<std::string, std::string> user_properties;
  };

  Subscriber(const MosquittoServer& server, const std::string& filter,
             const std::string& user = "", const std::string& password = "") {
    mosquitto_lib_init();
    mosq_ = mosquitto_new(nullptr, true, this);
    mosquitto_int_option(mosq_, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    if (!user.empty()) mosquitto_username_pw_set(mosq_, user.c_str(), password.c_str());
    mosquitto_connect_v5_callback_set(mosq_, &Subscriber::OnConnect);
    mosquitto_subscribe_v5_callback_set(mosq_, &Subscriber::OnSubscribe);
    mosquitto_message_v5_callback_set(mosq_, &Subscriber::OnMessage);
    filter_ = filter;
    EXPECT_EQ(mosquitto_connect(mosq_, "127.0.0.1", server.port(), 30), MOSQ_ERR_SUCCESS);
    EXPECT_EQ(mosquitto_loop_start(mosq_), MOSQ_ERR_SUCCESS);
    std::unique_lock lock(mutex_);
    EXPECT_TRUE(changed_.wait_for(lock, std::chrono::seconds(10), [&] { return subscribed_; }))
        << "subscription not acknowledged";
  }
  ~Subscriber() {
    mosquitto_disconnect(mosq_);
    mosquitto_loop_stop(mosq_, false);
    mosquitto_destroy(mosq_);
  }

  // Waits (with a deadline) until `count` messages have arrived.
  std::vector<Received> WaitFor(std::size_t count,
                                std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, limit, [&] { return received_.size() >= count; });
    return received_;
  }

 private:
  static void OnConnect(mosquitto* mosq, void* self, int, int, const mosquitto_property*) {
    mosquitto_subscribe_v5(mosq, nullptr, static_cast<Subscriber*>(self)->filter_.c_str(), 1, 0,
                           nullptr);
  }
  static void OnSubscribe(mosquitto*, void* self, int, int, const int*, const mosquitto_property*) {
    auto* subscriber = static_cast<Subscriber*>(self);
    const std::lock_guard lock(subscriber->mutex_);
    subscriber->subscribed_ = true;
    subscriber->changed_.notify_all();
  }
  static void OnMessage(mosquitto*, void* self, const mosquitto_message* message,
                        const mosquitto_property* properties) {
    Received received;
    received.topic = message->topic;
    received.payload.assign(static_cast<const char*>(message->payload),
                            static_cast<std::size_t>(message->payloadlen));
    char* content_type = nullptr;
    if (mosquitto_property_read_string(properties, MQTT_PROP_CONTENT_TYPE, &content_type,
                                       false) != nullptr) {
      received.content_type = content_type;
      free(content_type);
    }
    for (const mosquitto_property* p = properties; p != nullptr; p = mosquitto_property_next(p)) {
      if (mosquitto_property_identifier(p) != MQTT_PROP_USER_PROPERTY) continue;
      char* name = nullptr;
      char* value = nullptr;
      if (mosquitto_property_read_string_pair(p, MQTT_PROP_USER_PROPERTY, &name, &value, false) !=
          nullptr) {
        received.user_properties.emplace(name, value);
        free(name);
        free(value);
      }
    }
    auto* subscriber = static_cast<Subscriber*>(self);
    const std::lock_guard lock(subscriber->mutex_);
    subscriber->received_.push_back(std::move(received));
    subscriber->changed_.notify_all();
  }

  mosquitto* mosq_ = nullptr;
  std::string filter_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool subscribed_ = false;
  std::vector<Received> received_;
};

}  // namespace outbox::transport::testing
