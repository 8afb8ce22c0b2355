// Issue #10, security: secrets given as env: or file: references never
// appear in logs, last_error, metrics or outboxctl output, even when the
// receiver quotes every request header (and the bare token) back in its
// error body; and the secure defaults hold (TLS verification on, /metrics
// on loopback). TLS refusal of an unknown certificate is tested in
// tests/transport/endpoint_tls_test.cc (RefusesAnUnknownCertificateByDefault,
// AcceptsItWithItsCaConfigured).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

#include "../agent/agent_fixture.h"
#include "capture_sink.h"
#include "fault_server.h"
#include "run_process.h"

namespace outbox::reliability::testing {
namespace {

using agent::Agent;
using agent::Options;
using agent::TopicOptions;
using agent::testing::WaitFor;
using namespace std::chrono_literals;

constexpr char kToken[] = "7f3a9c-very-secret-bearer-token-2b1e";
constexpr char kSigningKey[] = "leaky-signing-key-012345";  // 24 bytes

class SecretsTest : public agent::testing::AgentTest {};

TEST_F(SecretsTest, SecretsNeverLeakIntoLogsErrorsMetricsOrOutboxctl) {
  ::setenv("OUTBOX_TEST_BEARER", (std::string("Bearer ") + kToken).c_str(), 1);
  const std::string signing_secret =
      "whsec_" + std::string("bGVha3ktc2lnbmluZy1rZXktMDEyMzQ1");  // base64 of kSigningKey
  const std::string secret_file = dir_.File("signing-secret");
  std::ofstream(secret_file) << signing_secret << '\n';

  // A careless receiver: a 500 whose body repeats every request header,
  // then the bare token and the signing secret in both forms.
  FaultServer server([](const FaultRequest&) { return Fault::kEcho; });
  server.SetEchoSuffix(std::string("token=") + kToken + " secret=" + signing_secret +
                       " key=bGVha3ktc2lnbmluZy1rZXktMDEyMzQ1");
  server.Start();

  auto sink = std::make_shared<CaptureSink>();
  Options options = BaseOptions();
  options.sweep_interval_ms = 20;
  options.logger = CaptureLogger(sink);
  TopicOptions topic;
  topic.endpoint.url = server.Url("/events");
  topic.endpoint.headers = {
      {"Authorization", transport::ResolveSecret("env:OUTBOX_TEST_BEARER", "headers")}};
  topic.endpoint.signing_secrets = {
      transport::ResolveSecret("file:" + secret_file, "signing_secret")};
  topic.retry.first_interval_ms = 5;
  topic.retry.max_interval_ms = 20;
  topic.breaker.failure_threshold = 3;
  topic.breaker.open_ms = 10;
  topic.breaker.max_open_ms = 20;
  options.topics["t"] = topic;
  Agent agent(options);
  agent.Start();
  for (int i = 0; i < 5; ++i) Commit(&agent, "t", "k" + std::to_string(i));
  // Every row has failed with the echo recorded, and the breaker has opened
  // (its log line quotes the error too).
  ASSERT_TRUE(WaitFor([&] {
    SQLite::Statement q(*observer_, "SELECT count(*) FROM outbox WHERE last_error IS NOT NULL");
    q.executeStep();
    return q.getColumn(0).getInt() == 5 && sink->Count("breaker open") > 0;
  }));
  const std::string metrics = agent::RenderPrometheus(agent.Snapshot());
  agent.Stop();

  // The secrets did travel (so the test means something) ...
  bool authorization_seen = false;
  for (const FaultRequest& request : server.Requests()) {
    authorization_seen |= request.Header("authorization") == std::string("Bearer ") + kToken;
    EXPECT_EQ(request.Header("webhook-signature").rfind("v1,", 0), 0u);
  }
  EXPECT_TRUE(authorization_seen);
  // ... and came back redacted.
  std::string errors;
  {
    SQLite::Statement q(*observer_, "SELECT group_concat(last_error, '\n') FROM outbox");
    q.executeStep();
    errors = q.getColumn(0).getString();
  }
  EXPECT_NE(errors.find("[redacted]"), std::string::npos) << errors;
  EXPECT_NE(errors.find("HTTP 500"), std::string::npos) << errors;

  std::map<std::string, std::string> haystacks = {
      {"log", sink->Text()}, {"last_error", errors}, {"metrics", metrics}};
  for (const std::vector<std::string>& command : std::vector<std::vector<std::string>>{
           {"list"}, {"list", "--json"}, {"show", "1"}, {"show", "1", "--json"}, {"stats"},
           {"stats", "--json"}}) {
    std::vector<std::string> argv = {OUTBOX_OUTBOXCTL, "--db", db_path_};
    argv.insert(argv.end(), command.begin(), command.end());
    const ProcessResult result = RunProcess(argv);
    EXPECT_EQ(result.ExitCode(), 0) << result.err;
    std::string name = "outboxctl";
    for (const auto& part : command) name += " " + part;
    haystacks[name] = result.out + result.err;
  }
  EXPECT_NE(haystacks["outboxctl show 1"].find("[redacted]"), std::string::npos);
  for (const auto& [where, text] : haystacks) {
    SCOPED_TRACE(where);
    EXPECT_EQ(text.find(kToken), std::string::npos) << text;
    EXPECT_EQ(text.find(signing_secret), std::string::npos) << text;
    EXPECT_EQ(text.find("bGVha3ktc2lnbmluZy1rZXktMDEyMzQ1"), std::string::npos) << text;
    EXPECT_EQ(text.find(kSigningKey), std::string::npos) << text;
  }
  ::unsetenv("OUTBOX_TEST_BEARER");
}

TEST(SecureDefaults, TlsVerificationIsOnAndMetricsListenOnLoopback) {
  EXPECT_FALSE(transport::TlsOptions{}.insecure_skip_verify);
  const agent::Config config =
      agent::ParseConfig(R"({"topics": {"a": {"url": "https://collector.example/a"}}})");
  EXPECT_EQ(config.metrics_listen, "127.0.0.1:9464");
  EXPECT_FALSE(config.options.topics.at("a").endpoint.tls.insecure_skip_verify);
}

// A file: secret is a short token; a config naming a device or a log file
// fails at once instead of reading without end.
TEST(SecureDefaults, AFileSecretOver64KiBIsRefused) {
  try {
    transport::ResolveSecret("file:/dev/zero", "headers.Authorization");
    ADD_FAILURE() << "read /dev/zero as a secret";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "headers.Authorization: file /dev/zero is larger than 64 KiB: not a secret");
  }
}

}  // namespace
}  // namespace outbox::reliability::testing
