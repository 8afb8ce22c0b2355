// A JetStream stream made and read back by a test: its message count and
// every Nats-Msg-Id, through nats.c directly (not through the sink).
#pragma once

#include <gtest/gtest.h>
#include <nats/nats.h>

#include <cstdint>
#include <set>
#include <string>

namespace outbox::transport::testing {

// File storage, so that it survives the server's restart; the default
// duplicate window (2 minutes).
class JetStreamStream {
 public:
  JetStreamStream(int port, const char* name, const char* subject) : name_(name) {
    const std::string url = "nats://127.0.0.1:" + std::to_string(port);
    EXPECT_EQ(natsConnection_ConnectTo(&connection_, url.c_str()), NATS_OK);
    EXPECT_EQ(natsConnection_JetStream(&js_, connection_, nullptr), NATS_OK);
    jsStreamConfig config;
    jsStreamConfig_Init(&config);
    config.Name = name;
    const char* subjects[] = {subject};
    config.Subjects = subjects;
    config.SubjectsLen = 1;
    config.Storage = js_FileStorage;  // survives the server's restart
    jsStreamInfo* info = nullptr;
    EXPECT_EQ(js_AddStream(&info, js_, &config, nullptr, nullptr), NATS_OK);
    jsStreamInfo_Destroy(info);
  }
  ~JetStreamStream() {
    jsCtx_Destroy(js_);
    natsConnection_Destroy(connection_);
  }
  std::uint64_t Count() {
    jsStreamInfo* info = nullptr;
    if (js_GetStreamInfo(&info, js_, name_.c_str(), nullptr, nullptr) != NATS_OK) return 0;
    const std::uint64_t count = info->State.Msgs;
    jsStreamInfo_Destroy(info);
    return count;
  }
  std::multiset<std::string> Ids() {
    std::multiset<std::string> ids;
    const std::uint64_t count = Count();
    for (std::uint64_t seq = 1; seq <= count; ++seq) {
      natsMsg* msg = nullptr;
      if (js_GetMsg(&msg, js_, name_.c_str(), seq, nullptr, nullptr) != NATS_OK) continue;
      const char* id = nullptr;
      if (natsMsgHeader_Get(msg, "Nats-Msg-Id", &id) == NATS_OK) ids.insert(id);
      natsMsg_Destroy(msg);
    }
    return ids;
  }

 private:
  std::string name_;
  natsConnection* connection_ = nullptr;
  jsCtx* js_ = nullptr;
};

}  // namespace outbox::transport::testing
