// The NATS JetStream sink against a real nats-server (JetStream on), started
// and stopped by each test on a port it picks at run time.
#include <gtest/gtest.h>
#include <nats/nats.h>
#include <openssl/evp.h>

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "broker_servers.h"
#include "outbox/transport.h"
#include "test_pki.h"

namespace outbox::transport {
namespace {

using testing::NatsServer;

// A client of the test's own, to create streams and read back what landed.
class StreamReader {
 public:
  explicit StreamReader(const NatsServer& server, const std::string& user = "",
                        const std::string& password = "") {
    natsOptions* options = nullptr;
    EXPECT_EQ(natsOptions_Create(&options), NATS_OK);
    const std::string url = "nats://127.0.0.1:" + std::to_string(server.port());
    natsOptions_SetURL(options, url.c_str());
    if (!user.empty()) natsOptions_SetUserInfo(options, user.c_str(), password.c_str());
    const natsStatus status = natsConnection_Connect(&connection_, options);
    natsOptions_Destroy(options);
    if (status != NATS_OK) throw std::runtime_error(nats_GetLastError(nullptr));
    EXPECT_EQ(natsConnection_JetStream(&js_, connection_, nullptr), NATS_OK);
  }
  ~StreamReader() {
    jsCtx_Destroy(js_);
    natsConnection_Destroy(connection_);
  }

  void AddStream(const std::string& name, const std::string& subject,
                 std::int32_t max_msg_size = -1) {
    jsStreamConfig config;
    jsStreamConfig_Init(&config);
    config.Name = name.c_str();
    const char* subjects[] = {subject.c_str()};
    config.Subjects = subjects;
    config.SubjectsLen = 1;
    config.Storage = js_MemoryStorage;
    config.MaxMsgSize = max_msg_size;
    config.Duplicates = 120'000'000'000;  // 2 minutes, in ns (JetStream's default)
    jsStreamInfo* info = nullptr;
    jsErrCode error = static_cast<jsErrCode>(0);
    ASSERT_EQ(js_AddStream(&info, js_, &config, nullptr, &error), NATS_OK)
        << nats_GetLastError(nullptr);
    jsStreamInfo_Destroy(info);
  }

  std::uint64_t Count(const std::string& stream) {
    jsStreamInfo* info = nullptr;
    jsErrCode error = static_cast<jsErrCode>(0);
    if (js_GetStreamInfo(&info, js_, stream.c_str(), nullptr, &error) != NATS_OK) return 0;
    const std::uint64_t count = info->State.Msgs;
    jsStreamInfo_Destroy(info);
    return count;
  }

  // Message `seq` of the stream: payload and the headers asked for.
  struct Stored {
    std::string payload;
    std::map<std::string, std::string> headers;
  };
  Stored Get(const std::string& stream, std::uint64_t seq, const std::vector<std::string>& names) {
    natsMsg* msg = nullptr;
    jsErrCode error = static_cast<jsErrCode>(0);
    Stored stored;
    if (js_GetMsg(&msg, js_, stream.c_str(), seq, nullptr, &error) != NATS_OK) return stored;
    stored.payload.assign(natsMsg_GetData(msg), static_cast<std::size_t>(natsMsg_GetDataLength(msg)));
    for (const std::string& name : names) {
      const char* value = nullptr;
      if (natsMsgHeader_Get(msg, name.c_str(), &value) == NATS_OK) stored.headers[name] = value;
    }
    natsMsg_Destroy(msg);
    return stored;
  }

 private:
  natsConnection* connection_ = nullptr;
  jsCtx* js_ = nullptr;
};

EndpointOptions OptionsFor(const std::string& url) {
  EndpointOptions options;
  options.url = url;
  options.connect_timeout_ms = 2000;
  options.timeout_ms = 2000;
  return options;
}

std::string IdOf(int i) { return MessageId("db", "orders", "key-" + std::to_string(i)); }

TEST(NatsSink, PublishAckIsDeliveredWithIdAndHeadersInTheStream) {
  NatsServer server;
  StreamReader reader(server);
  reader.AddStream("ORDERS", "orders.>");
  EndpointOptions options = OptionsFor(server.Url("orders.created"));
  options.cloudevents = CloudEventsMode::kBinary;
  const std::unique_ptr<Sink> sink = MakeSink(options);
  EXPECT_EQ(sink->kind(), SinkKind::kNats);

  const Headers row_headers = {{"X-Tenant", "acme"}, {"Content-Type", "application/json"}};
  const std::string id = IdOf(1);
  Message message{.message_id = id, .topic = "orders", .key = "key-1", .payload = R"({"n":1})",
                  .headers = row_headers, .created_at_ms = 1'700'000'000'000};
  const Result result = sink->Push(message);
  ASSERT_EQ(result.outcome, Outcome::kDelivered) << result.error;
  EXPECT_GT(result.request_bytes, 0U);

  ASSERT_EQ(reader.Count("ORDERS"), 1U);
  const auto stored =
      reader.Get("ORDERS", 1, {"Nats-Msg-Id", "Idempotency-Key", "X-Tenant", "Content-Type", "ce-id", "ce-type",
                               "ce-specversion", "ce-source", "ce-time"});
  EXPECT_EQ(stored.payload, R"({"n":1})");
  EXPECT_EQ(stored.headers.at("Nats-Msg-Id"), id);
  EXPECT_EQ(stored.headers.count("Idempotency-Key"), 0U);  // Nats-Msg-Id is the one id
  EXPECT_EQ(stored.headers.at("X-Tenant"), "acme");
  EXPECT_EQ(stored.headers.at("Content-Type"), "application/json");
  EXPECT_EQ(stored.headers.at("ce-id"), id);
  EXPECT_EQ(stored.headers.at("ce-type"), "orders");
  EXPECT_EQ(stored.headers.at("ce-specversion"), "1.0");
  EXPECT_EQ(stored.headers.at("ce-time"), "2023-11-14T22:13:20.000Z");
  EXPECT_FALSE(stored.headers.at("ce-source").empty());
}

TEST(NatsSink, ResendWithinTheDuplicateWindowIsDeliveredAndStoredOnce) {
  NatsServer server;
  StreamReader reader(server);
  reader.AddStream("ORDERS", "orders");
  const std::unique_ptr<Sink> sink = MakeSink(OptionsFor(server.Url("orders")));
  const std::string id = IdOf(7);
  const Message message{.message_id = id, .topic = "orders", .payload = "{}"};
  for (int attempt = 0; attempt < 3; ++attempt) {
    const Result result = sink->Push(message);
    EXPECT_EQ(result.outcome, Outcome::kDelivered) << result.error;
  }
  EXPECT_EQ(reader.Count("ORDERS"), 1U);
}

TEST(NatsSink, BatchPublishesEachMessageInOrder) {
  NatsServer server;
  StreamReader reader(server);
  reader.AddStream("ORDERS", "orders");
  EndpointOptions options = OptionsFor(server.Url("orders"));
  options.batch.max_messages = 10;
  const std::unique_ptr<Sink> sink = MakeSink(options);
  std::vector<std::string> ids;
  std::vector<std::string> payloads;
  for (int i = 0; i < 10; ++i) {
    ids.push_back(IdOf(i));
    payloads.push_back(std::to_string(i));
  }
  std::vector<Message> messages;
  for (std::size_t i = 0; i < 10; ++i) {
    messages.push_back({.message_id = ids[i], .topic = "orders", .payload = payloads[i]});
  }
  ASSERT_EQ(sink->PushBatch(messages).outcome, Outcome::kDelivered);
  ASSERT_EQ(reader.Count("ORDERS"), 10U);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(reader.Get("ORDERS", static_cast<std::uint64_t>(i + 1), {}).payload,
              std::to_string(i));
  }
  EXPECT_THROW(sink->PushBatch({}), std::invalid_argument);
}

TEST(NatsSink, ConcurrentWorkersLandEveryMessageExactlyOnce) {
  NatsServer server;
  StreamReader reader(server);
  reader.AddStream("ORDERS", "orders");
  const std::unique_ptr<Sink> sink = MakeSink(OptionsFor(server.Url("orders")));
  constexpr int kWorkers = 8;
  constexpr int kPerWorker = 125;
  std::atomic<int> failures{0};
  {
    std::vector<std::jthread> workers;
    for (int w = 0; w < kWorkers; ++w) {
      workers.emplace_back([&, w] {
        for (int i = 0; i < kPerWorker; ++i) {
          // Every message twice: the second must be dropped as a duplicate.
          const std::string id = IdOf(w * kPerWorker + i);
          const Message message{.message_id = id, .topic = "orders", .payload = id};
          for (int copy = 0; copy < 2; ++copy) {
            if (sink->Push(message).outcome != Outcome::kDelivered) ++failures;
          }
        }
      });
    }
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(reader.Count("ORDERS"), static_cast<std::uint64_t>(kWorkers * kPerWorker));
}

TEST(NatsSink, NoStreamForTheSubjectIsAnEndpointFailure) {
  NatsServer server;
  const std::unique_ptr<Sink> sink = MakeSink(OptionsFor(server.Url("nowhere")));
  const std::string id = IdOf(1);
  const Result result = sink->Push({.message_id = id, .topic = "orders", .payload = "{}"});
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_FALSE(result.configuration_failure);
  EXPECT_NE(result.error.find("no responders"), std::string::npos) << result.error;
}

TEST(NatsSink, MessageAboveTheStreamsLimitIsAMessageFailure) {
  NatsServer server;
  StreamReader reader(server);
  reader.AddStream("SMALL", "small", 512);
  const std::unique_ptr<Sink> sink = MakeSink(OptionsFor(server.Url("small")));
  const std::string id = IdOf(1);
  const std::string big(1000, 'x');
  const Result result = sink->Push({.message_id = id, .topic = "orders", .payload = big});
  EXPECT_EQ(result.outcome, Outcome::kMessageFailure) << result.error;
  EXPECT_EQ(reader.Count("SMALL"), 0U);
  // The next, smaller message still goes through.
  EXPECT_EQ(sink->Push({.message_id = IdOf(2), .topic = "orders", .payload = "ok"}).outcome,
            Outcome::kDelivered);
}

TEST(NatsSink, MessageAboveTheServersMaxPayloadIsAMessageFailure) {
  NatsServer server("max_payload: 1024\n");
  StreamReader reader(server);
  reader.AddStream("ORDERS", "orders");
  const std::unique_ptr<Sink> sink = MakeSink(OptionsFor(server.Url("orders")));
  const std::string id = IdOf(1);
  const Result result = sink->Push({.message_id = id, .topic = "orders", .payload = std::string(4096, 'x')});
  EXPECT_EQ(result.outcome, Outcome::kMessageFailure) << result.error;
}

TEST(NatsSink, RowHeaderThatIsNoHeaderIsAMessageFailureWithoutIo) {
  // No server at all: the message is refused before connecting.
  const std::unique_ptr<Sink> sink = MakeSink(OptionsFor("nats://127.0.0.1:1/orders"));
  const Headers bad = {{"Bad Name", "x"}};
  const std::string id = IdOf(1);
  const Result result = sink->Push({.message_id = id, .topic = "orders", .payload = "{}", .headers = bad});
  EXPECT_EQ(result.outcome, Outcome::kMessageFailure);
}

TEST(NatsSink, ServerOutageIsAnEndpointFailureAndDeliveryResumesAfterIt) {
  NatsServer server;
  {
    StreamReader reader(server);
    reader.AddStream("ORDERS", "orders");  // memory storage: re-made below
  }
  const std::unique_ptr<Sink> sink = MakeSink(OptionsFor(server.Url("orders")));
  ASSERT_EQ(sink->Push({.message_id = IdOf(1), .topic = "orders", .payload = "1"}).outcome,
            Outcome::kDelivered);
  server.Stop();
  const Result down = sink->Push({.message_id = IdOf(2), .topic = "orders", .payload = "2"});
  EXPECT_EQ(down.outcome, Outcome::kEndpointFailure);
  EXPECT_FALSE(down.configuration_failure);
  server.Start();
  StreamReader reader(server);
  reader.AddStream("ORDERS", "orders");
  // nats.c reconnects in the background: retry like the agent does, until a
  // deadline.
  Result result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  do {
    result = sink->Push({.message_id = IdOf(2), .topic = "orders", .payload = "2"});
  } while (result.outcome != Outcome::kDelivered && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(result.outcome, Outcome::kDelivered) << result.error;
  EXPECT_EQ(reader.Count("ORDERS"), 1U);
}

TEST(NatsSink, NoServerIsAnEndpointFailure) {
  const int port = testing::FreeLoopbackPort();
  const std::unique_ptr<Sink> sink =
      MakeSink(OptionsFor("nats://127.0.0.1:" + std::to_string(port) + "/orders"));
  const Result result = sink->Push({.message_id = IdOf(1), .topic = "orders", .payload = "1"});
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_FALSE(result.configuration_failure);
}

constexpr const char* kUsers = R"(
authorization {
  users = [
    {user: admin, password: admin-secret}
    {user: device, password: device-secret,
     permissions: {publish: {allow: "orders"}, subscribe: {allow: "_INBOX.>"}}}
    {user: readonly, password: readonly-secret,
     permissions: {publish: {deny: "orders"}}}
  ]
}
)";

TEST(NatsSink, UserAndPasswordAuthenticate) {
  NatsServer server(kUsers);
  StreamReader reader(server, "admin", "admin-secret");
  reader.AddStream("ORDERS", "orders");
  EndpointOptions options = OptionsFor(server.Url("orders"));
  options.nats.user = "device";
  options.nats.password = "device-secret";
  const std::unique_ptr<Sink> sink = MakeSink(options);
  const Result result = sink->Push({.message_id = IdOf(1), .topic = "orders", .payload = "1"});
  EXPECT_EQ(result.outcome, Outcome::kDelivered) << result.error;
  EXPECT_EQ(reader.Count("ORDERS"), 1U);
}

TEST(NatsSink, WrongPasswordIsAConfigurationFailure) {
  NatsServer server(kUsers);
  EndpointOptions options = OptionsFor(server.Url("orders"));
  options.nats.user = "device";
  options.nats.password = "wrong";
  const std::unique_ptr<Sink> sink = MakeSink(options);
  const Result result = sink->Push({.message_id = IdOf(1), .topic = "orders", .payload = "1"});
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_TRUE(result.configuration_failure) << result.error;
  EXPECT_EQ(result.error.find("wrong"), std::string::npos);  // no secret in the error
}

TEST(NatsSink, PublishPermissionDeniedIsAConfigurationFailure) {
  NatsServer server(kUsers);
  StreamReader reader(server, "admin", "admin-secret");
  reader.AddStream("ORDERS", "orders");
  EndpointOptions options = OptionsFor(server.Url("orders"));
  options.nats.user = "readonly";
  options.nats.password = "readonly-secret";
  options.timeout_ms = 1000;
  const std::unique_ptr<Sink> sink = MakeSink(options);
  const Result result = sink->Push({.message_id = IdOf(1), .topic = "orders", .payload = "1"});
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_TRUE(result.configuration_failure) << result.error;
  EXPECT_EQ(reader.Count("ORDERS"), 0U);
}

TEST(NatsSink, TokenAuthenticates) {
  NatsServer server("authorization {\n  token: \"s3cret-token\"\n}\n");
  EndpointOptions options = OptionsFor(server.Url("orders"));
  options.nats.token = "s3cret-token";
  const std::unique_ptr<Sink> sink = MakeSink(options);
  // No stream: the answer proves the connection was accepted.
  const Result result = sink->Push({.message_id = IdOf(1), .topic = "orders", .payload = "1"});
  EXPECT_NE(result.error.find("no responders"), std::string::npos) << result.error;
  options.nats.token = "other";
  const Result refused = MakeSink(options)->Push({.message_id = IdOf(1), .topic = "orders", .payload = "1"});
  EXPECT_TRUE(refused.configuration_failure) << refused.error;
}

// A NATS user NKey pair made with OpenSSL: Ed25519 keys in NATS's encoding
// (a prefix byte, the key, CRC-16/XMODEM little-endian, base32 unpadded).
struct NKeyPair {
  std::string public_key;  // U...
  std::string seed;        // SU...
};

std::string NatsEncode(const std::vector<unsigned char>& bytes) {
  std::vector<unsigned char> data = bytes;
  std::uint16_t crc = 0;
  for (const unsigned char byte : bytes) {
    crc = static_cast<std::uint16_t>(crc ^ (byte << 8));
    for (int bit = 0; bit < 8; ++bit) {
      crc = static_cast<std::uint16_t>((crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
  }
  data.push_back(static_cast<unsigned char>(crc & 0xFF));
  data.push_back(static_cast<unsigned char>(crc >> 8));
  constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  std::string text;
  unsigned buffer = 0;
  int bits = 0;
  for (const unsigned char byte : data) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      text += kAlphabet[(buffer >> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) text += kAlphabet[(buffer << (5 - bits)) & 31];
  return text;
}

NKeyPair MakeUserNKey() {
  EVP_PKEY* key = nullptr;
  EVP_PKEY_CTX* context = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr);
  EVP_PKEY_keygen_init(context);
  EVP_PKEY_keygen(context, &key);
  EVP_PKEY_CTX_free(context);
  std::vector<unsigned char> raw_private(32), raw_public(32);
  std::size_t length = 32;
  EVP_PKEY_get_raw_private_key(key, raw_private.data(), &length);
  length = 32;
  EVP_PKEY_get_raw_public_key(key, raw_public.data(), &length);
  EVP_PKEY_free(key);
  constexpr unsigned char kUser = 20 << 3;
  constexpr unsigned char kSeed = 18 << 3;
  std::vector<unsigned char> public_bytes = {kUser};
  public_bytes.insert(public_bytes.end(), raw_public.begin(), raw_public.end());
  std::vector<unsigned char> seed_bytes = {static_cast<unsigned char>(kSeed | (kUser >> 5)),
                                           static_cast<unsigned char>((kUser & 31) << 3)};
  seed_bytes.insert(seed_bytes.end(), raw_private.begin(), raw_private.end());
  return {NatsEncode(public_bytes), NatsEncode(seed_bytes)};
}

TEST(NatsSink, NKeyAuthenticates) {
  const NKeyPair user = MakeUserNKey();
  ASSERT_TRUE(user.public_key.starts_with("U")) << user.public_key;
  ASSERT_TRUE(user.seed.starts_with("SU")) << user.seed;
  NatsServer server("authorization {\n  users = [ { nkey: " + user.public_key + " } ]\n}\n");
  EndpointOptions options = OptionsFor(server.Url("orders"));
  options.nats.nkey = user.public_key;
  options.nats.nkey_seed = user.seed;
  const Result result = MakeSink(options)->Push({.message_id = IdOf(1), .topic = "orders", .payload = "1"});
  // Connected (no stream is configured here, so JetStream has no responder).
  EXPECT_NE(result.error.find("no responders"), std::string::npos) << result.error;

  options.nats.nkey_seed = MakeUserNKey().seed;  // signs with the wrong key
  const Result refused = MakeSink(options)->Push({.message_id = IdOf(1), .topic = "orders", .payload = "1"});
  EXPECT_TRUE(refused.configuration_failure) << refused.error;
}

// libnats 3.4 drops a signature whose first byte is zero, one connect in 256
// on average; without the sink's retry 1500 connects all succeed with a
// probability of 0.3 %.
TEST(NatsSink, NKeyConnectsEveryTime) {
  const NKeyPair user = MakeUserNKey();
  NatsServer server("authorization {\n  users = [ { nkey: " + user.public_key + " } ]\n}\n");
  EndpointOptions options = OptionsFor(server.Url("orders"));
  options.nats.nkey = user.public_key;
  options.nats.nkey_seed = user.seed;
  int refused = 0;
  for (int dial = 0; dial < 1500; ++dial) {
    const Result result = MakeSink(options)->Push({.message_id = IdOf(1), .topic = "orders", .payload = "1"});
    if (result.error.find("no responders") == std::string::npos) ++refused;
  }
  EXPECT_EQ(refused, 0);
}

TEST(NatsSink, MutualTlsWithTheConfiguredCa) {
  const testing::TestPki pki;
  NatsServer server("tls {\n  cert_file: \"" + pki.server().cert_file + "\"\n  key_file: \"" +
                    pki.server().key_file + "\"\n  ca_file: \"" + pki.ca().cert_file +
                    "\"\n  verify: true\n}\n");
  EndpointOptions options = OptionsFor(server.Url("orders", /*tls=*/true));
  options.tls.ca_file = pki.ca().cert_file;
  options.tls.client_cert_file = pki.client().cert_file;
  options.tls.client_key_file = pki.client().key_file;
  const Result result =
      MakeSink(options)->Push({.message_id = IdOf(1), .topic = "orders", .payload = "1"});
  // Connected and asked JetStream (no stream configured here).
  EXPECT_NE(result.error.find("no responders"), std::string::npos) << result.error;

  options.tls.client_cert_file.clear();
  options.tls.client_key_file.clear();
  const Result refused =
      MakeSink(options)->Push({.message_id = IdOf(1), .topic = "orders", .payload = "1"});
  EXPECT_EQ(refused.outcome, Outcome::kEndpointFailure);
  EXPECT_EQ(refused.error.find("no responders"), std::string::npos) << refused.error;
}

TEST(NatsSink, AbortFailsLaterCallsWithoutIoUntilReset) {
  NatsServer server;
  StreamReader reader(server);
  reader.AddStream("ORDERS", "orders");
  const std::unique_ptr<Sink> sink = MakeSink(OptionsFor(server.Url("orders")));
  sink->AbortAll();
  const Result aborted = sink->Push({.message_id = IdOf(1), .topic = "orders", .payload = "1"});
  EXPECT_EQ(aborted.outcome, Outcome::kEndpointFailure);
  EXPECT_EQ(aborted.error, "aborted");
  EXPECT_EQ(reader.Count("ORDERS"), 0U);
  sink->ResetAbort();
  EXPECT_EQ(sink->Push({.message_id = IdOf(1), .topic = "orders", .payload = "1"}).outcome,
            Outcome::kDelivered);
}

}  // namespace
}  // namespace outbox::transport
