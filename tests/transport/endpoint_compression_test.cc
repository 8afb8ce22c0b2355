// Endpoint's gzip request bodies against a real HTTP server on 127.0.0.1
// (test_server.h). cpp-httplib decodes gzip request bodies itself, so what
// the server records is the body after decoding: a body that decodes to what
// was meant proves the encoding, and Content-Length is the size on the wire.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "outbox/transport.h"
#include "test_server.h"

namespace outbox::transport {
namespace {

using testing::RecordedRequest;
using testing::TestServer;

constexpr std::int64_t kCreatedAtMs = 1'614'265'330'123;
constexpr char kSecret[] = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

// A JSON order of about `bytes` bytes, repetitive the way real events are.
std::string OrderJson(int n, std::size_t bytes = 600) {
  std::string json = R"({"order_id":"A-)" + std::to_string(n) + R"(","items":[)";
  for (int item = 0; json.size() < bytes; ++item) {
    if (item > 0) json += ',';
    json += R"({"sku":"SKU-)" + std::to_string(1000 + item) + R"(","qty":)" +
            std::to_string(1 + item % 3) + R"(,"price_cents":)" + std::to_string(499 + item) + "}";
  }
  return json + "]}";
}

Message MessageWith(std::string_view payload) {
  return {.message_id = "3f6c0e2b", .topic = "order.created", .payload = payload,
          .created_at_ms = kCreatedAtMs};
}

class EndpointCompressionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Post("/ok", [](const httplib::Request&, httplib::Response& response) {
      response.status = 200;
    });
    // A receiver that refuses any encoded body, as one without gzip support
    // would.
    server_.Post("/no-gzip", [](const httplib::Request& request, httplib::Response& response) {
      response.status = request.has_header("Content-Encoding") ? 415 : 200;
      if (response.status == 415) response.set_content("gzip not supported", "text/plain");
    });
    server_.Post("/415", [](const httplib::Request&, httplib::Response& response) {
      response.status = 415;
    });
    server_.Start();
  }

  EndpointOptions GzipOptions(const std::string& path, std::size_t min_bytes = 1024) const {
    EndpointOptions options;
    options.url = server_.Url(path);
    options.connect_timeout_ms = 1000;
    options.timeout_ms = 2000;
    options.ce_source = "urn:test";
    options.compression = Compression::kGzip;
    options.compress_min_bytes = min_bytes;
    return options;
  }

  TestServer server_;
};

TEST_F(EndpointCompressionTest, BodyAtTheThresholdGoesGzippedAndDecodesToTheSameBody) {
  const std::string payload = OrderJson(1, 2000);
  Endpoint endpoint(GzipOptions("/ok", payload.size()));
  const Result result = endpoint.Push(MessageWith(payload));
  ASSERT_EQ(result.outcome, Outcome::kDelivered) << result.error;
  const RecordedRequest request = server_.requests().at(0);
  EXPECT_EQ(request.Header("Content-Encoding"), "gzip");
  EXPECT_EQ(request.body, payload);
  EXPECT_EQ(request.Header("Content-Length"), std::to_string(result.request_bytes));
  EXPECT_LT(result.request_bytes, payload.size() / 2);
}

TEST_F(EndpointCompressionTest, BodyBelowTheThresholdGoesAsItIs) {
  const std::string payload = OrderJson(1, 2000);
  Endpoint endpoint(GzipOptions("/ok", payload.size() + 1));
  ASSERT_EQ(endpoint.Push(MessageWith(payload)).outcome, Outcome::kDelivered);
  const RecordedRequest request = server_.requests().at(0);
  EXPECT_FALSE(request.Has("Content-Encoding"));
  EXPECT_EQ(request.Header("Content-Length"), std::to_string(payload.size()));
}

TEST_F(EndpointCompressionTest, CompressionNoneNeverEncodes) {
  EndpointOptions options = GzipOptions("/ok", 0);
  options.compression = Compression::kNone;
  Endpoint endpoint(options);
  const std::string payload = OrderJson(1, 5000);
  ASSERT_EQ(endpoint.Push(MessageWith(payload)).outcome, Outcome::kDelivered);
  EXPECT_FALSE(server_.requests().at(0).Has("Content-Encoding"));
}

TEST_F(EndpointCompressionTest, NdjsonBatchIsCompressedWhole) {
  EndpointOptions options = GzipOptions("/ok");
  options.batch.max_messages = 100;
  Endpoint endpoint(options);
  std::vector<std::string> payloads;
  std::vector<std::string> ids;
  for (int i = 0; i < 100; ++i) {
    payloads.push_back(OrderJson(i, 300));
    ids.push_back(MessageId("db", "order.created", std::to_string(i)));
  }
  std::vector<Message> batch;
  for (int i = 0; i < 100; ++i) {
    batch.push_back({.message_id = ids[static_cast<std::size_t>(i)],
                     .topic = "order.created",
                     .payload = payloads[static_cast<std::size_t>(i)],
                     .created_at_ms = kCreatedAtMs + i});
  }
  const Result result = endpoint.PushBatch(batch);
  ASSERT_EQ(result.outcome, Outcome::kDelivered) << result.error;
  const RecordedRequest request = server_.requests().at(0);
  EXPECT_EQ(request.Header("Content-Encoding"), "gzip");
  EXPECT_EQ(request.Header("Content-Type"), "application/x-ndjson");
  EXPECT_EQ(request.body, BuildNdjsonBatch(batch));
  EXPECT_LT(result.request_bytes * 4, request.body.size());
}

TEST_F(EndpointCompressionTest, SignatureCoversTheUncompressedBody) {
  EndpointOptions options = GzipOptions("/ok", 0);
  options.signing_secrets = {kSecret};
  Endpoint endpoint(options);
  ASSERT_EQ(endpoint.Push(MessageWith(OrderJson(7))).outcome, Outcome::kDelivered);
  const RecordedRequest request = server_.requests().at(0);
  ASSERT_EQ(request.Header("Content-Encoding"), "gzip");
  const std::vector<std::string> secrets = {kSecret};
  const std::int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
  EXPECT_EQ(VerifyWebhookSignature(secrets, request.Header("webhook-id"),
                                   request.Header("webhook-timestamp"), request.body,
                                   request.Header("webhook-signature"), now_s),
            SignatureCheck::kValid);
}

TEST_F(EndpointCompressionTest, Answer415ToAGzipBodyIsAConfigurationFailureNotTheMessages) {
  Endpoint endpoint(GzipOptions("/no-gzip", 0));
  const Result result = endpoint.Push(MessageWith(OrderJson(1)));
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_TRUE(result.configuration_failure);
  EXPECT_EQ(result.http_status, 415);
  EXPECT_NE(result.error.find("Content-Encoding: gzip"), std::string::npos) << result.error;
  EXPECT_NE(result.error.find("gzip not supported"), std::string::npos) << result.error;
}

TEST_F(EndpointCompressionTest, Answer415ToAPlainBodyStaysAMessageFailure) {
  // Below the threshold nothing is encoded: the receiver refused the message.
  Endpoint endpoint(GzipOptions("/415", 1 << 20));
  const Result result = endpoint.Push(MessageWith(OrderJson(1)));
  EXPECT_EQ(result.outcome, Outcome::kMessageFailure);
  EXPECT_FALSE(result.configuration_failure);
}

TEST_F(EndpointCompressionTest, ARowCannotClaimAContentEncoding) {
  Endpoint endpoint(GzipOptions("/ok", 1 << 20));
  const Headers row = {{"Content-Encoding", "br"}};
  const std::string payload = OrderJson(1);  // Message only views it
  Message message = MessageWith(payload);
  message.headers = row;
  ASSERT_EQ(endpoint.Push(message).outcome, Outcome::kDelivered);
  EXPECT_FALSE(server_.requests().at(0).Has("Content-Encoding"));
}

TEST(EndpointCompressionOptions, EndpointHeadersMayNotSetContentEncoding) {
  EndpointOptions options;
  options.url = "http://127.0.0.1:1/x";
  options.headers = {{"Content-Encoding", "gzip"}};
  try {
    Validate(options);
    FAIL() << "Content-Encoding accepted";
  } catch (const OptionError& error) {
    EXPECT_EQ(error.field(), "headers[0]");
  }
}

TEST(EndpointCompressionOptions, BrokerSinksRefuseCompression) {
  for (const char* url : {"nats://127.0.0.1:4222/orders", "mqtt://127.0.0.1:1883/orders"}) {
    EndpointOptions options;
    options.url = url;
    options.compression = Compression::kGzip;
    try {
      ValidateSink(options);
      FAIL() << url << ": compression accepted";
    } catch (const OptionError& error) {
      EXPECT_EQ(error.field(), "compression") << url;
    }
  }
}

}  // namespace
}  // namespace outbox::transport
