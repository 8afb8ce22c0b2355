// Endpoint against a real HTTP server on 127.0.0.1 (test_server.h).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "outbox/transport.h"
#include "test_server.h"

namespace outbox::transport {
namespace {

using namespace std::chrono_literals;
using testing::RecordedRequest;
using testing::TestServer;

constexpr std::int64_t kCreatedAtMs = 1'614'265'330'123;

std::int64_t NowS() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Message MessageWith(std::string_view payload, std::span<const Header> headers = {}) {
  return {.message_id = "3f6c0e2b",
          .topic = "order.created",
          .payload = payload,
          .headers = headers,
          .created_at_ms = kCreatedAtMs};
}

// The Standard Webhooks signature computed here from the specification, with
// OpenSSL directly, independently of the transport's own code.
std::string SpecSignature(const std::string& secret, const std::string& id,
                          const std::string& timestamp, const std::string& body) {
  const std::string encoded = secret.substr(std::string("whsec_").size());
  std::vector<unsigned char> key(encoded.size());
  int key_size = EVP_DecodeBlock(key.data(), reinterpret_cast<const unsigned char*>(encoded.data()),
                                 static_cast<int>(encoded.size()));
  for (auto it = encoded.rbegin(); it != encoded.rend() && *it == '='; ++it) --key_size;
  const std::string content = id + "." + timestamp + "." + body;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_size = 0;
  HMAC(EVP_sha256(), key.data(), key_size, reinterpret_cast<const unsigned char*>(content.data()),
       content.size(), mac, &mac_size);
  unsigned char base64[4 * EVP_MAX_MD_SIZE];
  const int base64_size = EVP_EncodeBlock(base64, mac, static_cast<int>(mac_size));
  return "v1," +
         std::string(reinterpret_cast<char*>(base64), static_cast<std::size_t>(base64_size));
}

// An IMF-fixdate `seconds_ahead` from now.
std::string HttpDateIn(int seconds_ahead) {
  const std::time_t when = std::time(nullptr) + seconds_ahead;
  std::tm parts{};
  gmtime_r(&when, &parts);
  char text[64];
  std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &parts);
  return text;
}

class EndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Post(
        "/ok", [](const httplib::Request&, httplib::Response& response) { response.status = 200; });
    server_.Post(R"(/status/(\d+))",
                 [](const httplib::Request& request, httplib::Response& response) {
                   response.status = std::stoi(request.matches[1]);
                   if (response.status >= 300 && response.status < 400) {
                     response.set_header("Location", "/elsewhere");
                   }
                   if (response.status >= 300) response.set_content("nope", "text/plain");
                 });
    server_.Post("/elsewhere", [](const httplib::Request&, httplib::Response& response) {
      response.status = 200;
    });
    // Answers 503 with the Retry-After the request's X-Retry-After asks for.
    server_.Post("/retry-after", [](const httplib::Request& request, httplib::Response& response) {
      response.status = 503;
      response.set_header("Retry-After", request.get_header_value("X-Retry-After"));
    });
    server_.Post("/hang", [this](const httplib::Request&, httplib::Response& response) {
      server_.WaitForRelease(10s);
      response.status = 200;
    });
    // Echoes the request's Authorization header in a long error page.
    server_.Post("/echo-auth", [](const httplib::Request& request, httplib::Response& response) {
      response.status = 500;
      response.set_content(
          "denied\r\nfor " + request.get_header_value("Authorization") + std::string(3000, '.'),
          "text/plain");
    });
    server_.Start();
  }

  EndpointOptions OptionsFor(const std::string& path) const {
    EndpointOptions options;
    options.url = server_.Url(path);
    options.connect_timeout_ms = 1000;
    options.timeout_ms = 2000;
    options.ce_source = "urn:test";
    return options;
  }

  TestServer server_;
};

TEST_F(EndpointTest, DeliversOn2xxAndReportsMetrics) {
  Endpoint endpoint(OptionsFor("/ok"));
  const Result result = endpoint.Push(MessageWith(R"({"n":1})"));
  EXPECT_EQ(result.outcome, Outcome::kDelivered);
  EXPECT_EQ(result.http_status, 200);
  EXPECT_EQ(result.error, "");
  EXPECT_FALSE(result.retry_after_ms);
  EXPECT_EQ(result.request_bytes, 7u);
  EXPECT_GT(result.duration_us, 0);
  ASSERT_EQ(server_.requests().size(), 1u);
  EXPECT_EQ(server_.requests()[0].body, R"({"n":1})");
}

TEST_F(EndpointTest, ClassifiesEveryStatusClass) {
  struct Case {
    int status;
    Outcome outcome;
    bool gone;
  };
  for (const Case& c : std::vector<Case>{{200, Outcome::kDelivered, false},
                                         {204, Outcome::kDelivered, false},
                                         {302, Outcome::kEndpointFailure, false},
                                         {400, Outcome::kMessageFailure, false},
                                         {401, Outcome::kEndpointFailure, false},
                                         {403, Outcome::kEndpointFailure, false},
                                         {404, Outcome::kEndpointFailure, false},
                                         {408, Outcome::kEndpointFailure, false},
                                         {409, Outcome::kMessageFailure, false},
                                         {410, Outcome::kMessageFailure, true},
                                         {413, Outcome::kMessageFailure, false},
                                         {422, Outcome::kMessageFailure, false},
                                         {425, Outcome::kEndpointFailure, false},
                                         {429, Outcome::kEndpointFailure, false},
                                         {500, Outcome::kEndpointFailure, false},
                                         {503, Outcome::kEndpointFailure, false}}) {
    Endpoint endpoint(OptionsFor("/status/" + std::to_string(c.status)));
    const Result result = endpoint.Push(MessageWith("{}"));
    EXPECT_EQ(result.outcome, c.outcome) << c.status;
    EXPECT_EQ(result.http_status, c.status);
    EXPECT_EQ(result.endpoint_gone, c.gone) << c.status;
    if (c.outcome != Outcome::kDelivered) {
      EXPECT_EQ(result.error, "HTTP " + std::to_string(c.status) + ": nope");
    }
  }
}

TEST_F(EndpointTest, NeverFollowsARedirect) {
  Endpoint endpoint(OptionsFor("/status/307"));
  const Result result = endpoint.Push(MessageWith("{}"));
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_EQ(result.http_status, 307);
  for (const RecordedRequest& request : server_.requests()) {
    EXPECT_NE(request.path, "/elsewhere");
  }
  EXPECT_EQ(server_.requests().size(), 1u);
}

TEST_F(EndpointTest, ReportsRetryAfterInSeconds) {
  Endpoint endpoint(OptionsFor("/retry-after"));
  const Headers row = {{"X-Retry-After", "7"}};
  const Result result = endpoint.Push(MessageWith("{}", row));
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_EQ(result.retry_after_ms, 7000);
}

TEST_F(EndpointTest, ReportsRetryAfterAsAnHttpDate) {
  Endpoint endpoint(OptionsFor("/retry-after"));
  const Headers row = {{"X-Retry-After", HttpDateIn(30)}};
  const Result result = endpoint.Push(MessageWith("{}", row));
  ASSERT_TRUE(result.retry_after_ms);
  // Whole seconds on the wire, and a little time passes on the way.
  EXPECT_GE(*result.retry_after_ms, 27'000);
  EXPECT_LE(*result.retry_after_ms, 30'000);
}

TEST_F(EndpointTest, CapsRetryAfter) {
  EndpointOptions options = OptionsFor("/retry-after");
  options.max_retry_after_ms = 60'000;
  Endpoint endpoint(options);
  const Headers row = {{"X-Retry-After", "86400"}};
  EXPECT_EQ(endpoint.Push(MessageWith("{}", row)).retry_after_ms, 60'000);
}

TEST_F(EndpointTest, TimesOutOnASlowServer) {
  EndpointOptions options = OptionsFor("/hang");
  options.timeout_ms = 200;
  Endpoint endpoint(options);
  const auto start = std::chrono::steady_clock::now();
  const Result result = endpoint.Push(MessageWith("{}"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_EQ(result.http_status, 0);
  EXPECT_NE(result.error.find("timed out"), std::string::npos) << result.error;
}

TEST_F(EndpointTest, ClosedPortIsAnEndpointFailure) {
  // A port that is bound but not listening refuses connections, and stays
  // ours for the test, so nobody else can start listening on it.
  const int socket_fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(socket_fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  ASSERT_EQ(bind(socket_fd, reinterpret_cast<sockaddr*>(&address), size), 0);
  ASSERT_EQ(getsockname(socket_fd, reinterpret_cast<sockaddr*>(&address), &size), 0);

  EndpointOptions options = OptionsFor("/");
  options.url = "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port)) + "/";
  Endpoint endpoint(options);
  const Result result = endpoint.Push(MessageWith("{}"));
  close(socket_fd);
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_EQ(result.http_status, 0);
  EXPECT_NE(result.error.find("onnect"), std::string::npos) << result.error;
}

TEST_F(EndpointTest, SequentialPushesReuseOneConnection) {
  Endpoint endpoint(OptionsFor("/ok"));
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(endpoint.Push(MessageWith("{}")).outcome, Outcome::kDelivered);
  }
  EXPECT_EQ(server_.requests().size(), 20u);
  EXPECT_EQ(server_.ConnectionCount(), 1u);
}

TEST_F(EndpointTest, ConcurrentCallersUseAtMostOneConnectionEach) {
  Endpoint endpoint(OptionsFor("/ok"));
  constexpr int kWorkers = 4;
  constexpr int kPushesEach = 10;
  std::vector<std::future<int>> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.push_back(std::async(std::launch::async, [&endpoint] {
      int delivered = 0;
      for (int i = 0; i < kPushesEach; ++i) {
        delivered += endpoint.Push(MessageWith("{}")).outcome == Outcome::kDelivered;
      }
      return delivered;
    }));
  }
  for (auto& worker : workers) EXPECT_EQ(worker.get(), kPushesEach);
  EXPECT_EQ(server_.requests().size(), std::size_t{kWorkers * kPushesEach});
  EXPECT_LE(server_.ConnectionCount(), std::size_t{kWorkers});
}

TEST_F(EndpointTest, SendsTheContractHeadersAndNoRowOverrides) {
  EndpointOptions options = OptionsFor("/ok");
  options.headers = {{"Authorization", "Bearer configured-token"}};
  Endpoint endpoint(options);
  const Headers row = {
      {"X-Tenant", "acme"}, {"Idempotency-Key", "evil"}, {"Authorization", "Bearer evil"},
      {"ce-id", "evil"},    {"webhook-id", "evil"},      {"Content-Length", "1"}};
  ASSERT_EQ(endpoint.Push(MessageWith(R"({"n":1})", row)).outcome, Outcome::kDelivered);

  const RecordedRequest request = server_.requests().at(0);
  EXPECT_EQ(request.Header("Idempotency-Key"), "3f6c0e2b");
  EXPECT_EQ(request.headers.count("Idempotency-Key"), 1u);
  EXPECT_EQ(request.Header("Authorization"), "Bearer configured-token");
  EXPECT_EQ(request.headers.count("Authorization"), 1u);
  EXPECT_EQ(request.Header("Content-Type"), "application/json");
  EXPECT_EQ(request.Header("Content-Length"), "7");
  EXPECT_EQ(request.Header("X-Tenant"), "acme");
  EXPECT_FALSE(request.Has("ce-id"));
  EXPECT_FALSE(request.Has("webhook-id"));
  EXPECT_FALSE(request.Has("Expect"));
  EXPECT_FALSE(request.Has("Transfer-Encoding"));
  EXPECT_TRUE(request.Header("User-Agent").starts_with("edge-outbox/"));
}

TEST_F(EndpointTest, AConfiguredUserAgentReplacesTheDefaultOne) {
  EndpointOptions options = OptionsFor("/ok");
  options.headers = {{"User-Agent", "probe/1"}};
  Endpoint endpoint(options);
  ASSERT_EQ(endpoint.Push(MessageWith("{}")).outcome, Outcome::kDelivered);

  const RecordedRequest request = server_.requests().at(0);
  EXPECT_EQ(request.headers.count("User-Agent"), 1u);
  EXPECT_EQ(request.Header("User-Agent"), "probe/1");
}

// The connection reuses its header lines from request to request: a shorter
// request after a longer one carries none of the longer one's lines.
TEST_F(EndpointTest, ARequestCarriesOnlyItsOwnRowHeaders) {
  Endpoint endpoint(OptionsFor("/ok"));
  const Headers many = {{"X-One", "1"}, {"X-Two", "2"}, {"X-Three", "3"}};
  const Headers one = {{"X-Four", "4"}};
  ASSERT_EQ(endpoint.Push(MessageWith("{}", many)).outcome, Outcome::kDelivered);
  ASSERT_EQ(endpoint.Push(MessageWith("{}", one)).outcome, Outcome::kDelivered);
  ASSERT_EQ(endpoint.Push(MessageWith("{}")).outcome, Outcome::kDelivered);

  const std::vector<RecordedRequest> requests = server_.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].Header("X-Three"), "3");
  EXPECT_FALSE(requests[1].Has("X-One"));
  EXPECT_FALSE(requests[1].Has("X-Three"));
  EXPECT_EQ(requests[1].Header("X-Four"), "4");
  EXPECT_FALSE(requests[2].Has("X-Four"));
  for (const RecordedRequest& request : requests) {
    EXPECT_EQ(request.headers.count("User-Agent"), 1u);
    EXPECT_EQ(request.headers.count("Idempotency-Key"), 1u);
    EXPECT_FALSE(request.Has("Expect"));
  }
}

TEST_F(EndpointTest, SignatureVerifiesWithTheSpecificationsAlgorithm) {
  EndpointOptions options = OptionsFor("/ok");
  options.signing_secrets = {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                             "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="};
  Endpoint endpoint(options);
  const std::int64_t before = NowS();
  ASSERT_EQ(endpoint.Push(MessageWith(R"({"n":1})")).outcome, Outcome::kDelivered);
  const std::int64_t after = NowS();

  const RecordedRequest request = server_.requests().at(0);
  EXPECT_EQ(request.Header("webhook-id"), "3f6c0e2b");
  const std::string timestamp = request.Header("webhook-timestamp");
  EXPECT_GE(std::stoll(timestamp), before);
  EXPECT_LE(std::stoll(timestamp), after);
  EXPECT_EQ(request.Header("webhook-signature"),
            SpecSignature(options.signing_secrets[0], "3f6c0e2b", timestamp, request.body) + " " +
                SpecSignature(options.signing_secrets[1], "3f6c0e2b", timestamp, request.body));
}

TEST_F(EndpointTest, CloudEventsBinaryModeHeaders) {
  EndpointOptions options = OptionsFor("/ok");
  options.cloudevents = CloudEventsMode::kBinary;
  Endpoint endpoint(options);
  ASSERT_EQ(endpoint.Push(MessageWith(R"({"n":1})")).outcome, Outcome::kDelivered);
  const RecordedRequest request = server_.requests().at(0);
  EXPECT_EQ(request.Header("ce-specversion"), "1.0");
  EXPECT_EQ(request.Header("ce-id"), "3f6c0e2b");
  EXPECT_EQ(request.Header("ce-type"), "order.created");
  EXPECT_EQ(request.Header("ce-source"), "urn:test");
  EXPECT_EQ(request.Header("ce-time"), "2021-02-25T15:02:10.123Z");
  EXPECT_EQ(request.body, R"({"n":1})");
}

TEST_F(EndpointTest, CloudEventsStructuredModeBody) {
  EndpointOptions options = OptionsFor("/ok");
  options.cloudevents = CloudEventsMode::kStructured;
  Endpoint endpoint(options);
  const Message message = MessageWith(R"({"n": 1})");
  ASSERT_EQ(endpoint.Push(message).outcome, Outcome::kDelivered);
  const RecordedRequest request = server_.requests().at(0);
  EXPECT_EQ(request.Header("Content-Type"), "application/cloudevents+json");
  EXPECT_FALSE(request.Has("ce-id"));
  EXPECT_EQ(request.body,
            R"({"specversion":"1.0","id":"3f6c0e2b","source":"urn:test","type":"order.created",)"
            R"("time":"2021-02-25T15:02:10.123Z","datacontenttype":"application/json",)"
            R"("data":{"n":1}})");
}

TEST_F(EndpointTest, NdjsonBatchOnTheWire) {
  EndpointOptions options = OptionsFor("/ok");
  options.batch.max_messages = 3;
  Endpoint endpoint(options);
  const std::vector<Message> batch = {{.message_id = "a", .topic = "t", .payload = "{\"n\": 1}"},
                                      {.message_id = "b", .topic = "t", .payload = "binary\x01"},
                                      {.message_id = "c", .topic = "t", .payload = "[2]"}};
  const Result result = endpoint.PushBatch(batch);
  EXPECT_EQ(result.outcome, Outcome::kDelivered);
  const RecordedRequest request = server_.requests().at(0);
  EXPECT_EQ(request.Header("Content-Type"), "application/x-ndjson");
  EXPECT_EQ(request.Header("Idempotency-Key"), BatchId(batch));
  EXPECT_EQ(
      request.body,
      R"({"id":"a","topic":"t","time":"1970-01-01T00:00:00.000Z","payload":{"n":1}})"
      "\n"
      R"({"id":"b","topic":"t","time":"1970-01-01T00:00:00.000Z","payload_base64":"YmluYXJ5AQ=="})"
      "\n"
      R"({"id":"c","topic":"t","time":"1970-01-01T00:00:00.000Z","payload":[2]})"
      "\n");
  EXPECT_EQ(result.request_bytes, request.body.size());
}

TEST_F(EndpointTest, CloudEventsBatchOnTheWire) {
  EndpointOptions options = OptionsFor("/ok");
  options.batch = {.max_messages = 2, .format = BatchFormat::kCloudEvents};
  Endpoint endpoint(options);
  const std::vector<Message> batch = {{.message_id = "a", .topic = "t", .payload = "1"},
                                      {.message_id = "b", .topic = "t", .payload = "2"}};
  ASSERT_EQ(endpoint.PushBatch(batch).outcome, Outcome::kDelivered);
  const RecordedRequest request = server_.requests().at(0);
  EXPECT_EQ(request.Header("Content-Type"), "application/cloudevents-batch+json");
  EXPECT_EQ(request.Header("Idempotency-Key"), BatchId(batch));
  EXPECT_EQ(request.body, BuildCloudEventsBatch(options, batch));
}

TEST_F(EndpointTest, RefusedBatchIsAMessageFailureToSplit) {
  EndpointOptions options = OptionsFor("/status/413");
  options.batch.max_messages = 2;
  Endpoint endpoint(options);
  const std::vector<Message> batch = {{.message_id = "a", .topic = "t", .payload = "1"},
                                      {.message_id = "b", .topic = "t", .payload = "2"}};
  const Result result = endpoint.PushBatch(batch);
  EXPECT_EQ(result.outcome, Outcome::kMessageFailure);
  EXPECT_EQ(result.http_status, 413);
  EXPECT_FALSE(result.endpoint_gone);
}

TEST_F(EndpointTest, PushBatchRejectsMisuseBeforeAnyRequest) {
  EndpointOptions options = OptionsFor("/ok");
  options.batch = {.max_messages = 2, .max_bytes = 4};
  Endpoint endpoint(options);
  const std::vector<Message> three = {{.message_id = "a"}, {.message_id = "b"}, {.message_id = "c"}};
  const std::vector<Message> heavy = {{.message_id = "a", .payload = "123"}, {.message_id = "b", .payload = "45"}};
  const std::vector<Message> one_heavy = {{.message_id = "a", .topic = "t", .payload = "123456"}};
  EXPECT_THROW(endpoint.PushBatch({}), std::invalid_argument);
  EXPECT_THROW(endpoint.PushBatch(three), std::invalid_argument);
  EXPECT_THROW(endpoint.PushBatch(heavy), std::invalid_argument);
  EXPECT_TRUE(server_.requests().empty());
  // A single message larger than max_bytes still goes, alone.
  EXPECT_EQ(endpoint.PushBatch(one_heavy).outcome, Outcome::kDelivered);
}

TEST_F(EndpointTest, AbortAllEndsAHangingTransferPromptly) {
  EndpointOptions options = OptionsFor("/hang");
  options.timeout_ms = 30'000;
  Endpoint endpoint(options);
  std::future<Result> push =
      std::async(std::launch::async, [&endpoint] { return endpoint.Push(MessageWith("{}")); });
  ASSERT_TRUE(server_.WaitForRequests(1, 5s));  // the transfer is in flight

  const auto abort_time = std::chrono::steady_clock::now();
  endpoint.AbortAll();
  ASSERT_EQ(push.wait_for(1s), std::future_status::ready);
  EXPECT_LT(std::chrono::steady_clock::now() - abort_time, 500ms);
  const Result result = push.get();
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_EQ(result.error, "aborted");
}

TEST_F(EndpointTest, AfterAbortPushesFailFastUntilReset) {
  EndpointOptions options = OptionsFor("/ok");
  Endpoint endpoint(options);
  endpoint.AbortAll();
  const Result aborted = endpoint.Push(MessageWith("{}"));
  EXPECT_EQ(aborted.outcome, Outcome::kEndpointFailure);
  EXPECT_EQ(aborted.error, "aborted");
  EXPECT_TRUE(server_.requests().empty());

  endpoint.ResetAbort();
  EXPECT_EQ(endpoint.Push(MessageWith("{}")).outcome, Outcome::kDelivered);
}

TEST_F(EndpointTest, MalformedRowHeaderFailsTheMessageWithoutARequest) {
  Endpoint endpoint(OptionsFor("/ok"));
  const Headers row = {{"X-Evil", "a\r\nInjected: yes"}};
  const Result result = endpoint.Push(MessageWith("{}", row));
  EXPECT_EQ(result.outcome, Outcome::kMessageFailure);
  EXPECT_EQ(result.http_status, 0);
  EXPECT_EQ(result.error, "headers[X-Evil]: value holds a control character");
  EXPECT_TRUE(server_.requests().empty());
}

TEST_F(EndpointTest, ErrorKeepsABoundedExcerptAndNoSecret) {
  EndpointOptions options = OptionsFor("/echo-auth");
  options.headers = {{"Authorization", "Bearer configured-token"}};
  options.max_error_body_bytes = 40;
  Endpoint endpoint(options);
  const Result result = endpoint.Push(MessageWith("{}"));
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_EQ(result.error, "HTTP 500: denied  for [redacted]" + std::string(18, '.'));
}

TEST_F(EndpointTest, SecretCutByTheExcerptCapIsStillRedacted) {
  EndpointOptions options = OptionsFor("/echo-auth");
  options.headers = {{"Authorization", "Bearer configured-token"}};
  options.max_error_body_bytes = 20;  // "denied  for Bearer c|onfigured-token"
  Endpoint endpoint(options);
  const Result result = endpoint.Push(MessageWith("{}"));
  EXPECT_EQ(result.error, "HTTP 500: denied  for [redacte");
}

TEST_F(EndpointTest, ASecretInsideAnotherIsRedactedWhole) {
  EndpointOptions options = OptionsFor("/echo-auth");
  // The X-Key value is the tail of the token: redacting it first would leave
  // "abcdefgh" of the token behind.
  options.headers = {{"X-Key", "12345678"}, {"Authorization", "Bearer abcdefgh12345678"}};
  options.max_error_body_bytes = 22;
  Endpoint endpoint(options);
  EXPECT_EQ(endpoint.Push(MessageWith("{}")).error, "HTTP 500: denied  for [redacted]");
}

}  // namespace
}  // namespace outbox::transport
