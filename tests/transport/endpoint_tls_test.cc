// Endpoint over TLS against a certificate made at test time (test_pki.h).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "outbox/transport.h"
#include "test_pki.h"
#include "test_server.h"

namespace outbox::transport {
namespace {

using testing::TestPki;
using testing::TestServer;

Message AnyMessage() { return {.message_id = "id-1", .topic = "t", .payload = "{}"}; }

class EndpointTlsTest : public ::testing::Test {
 protected:
  // Serves /ok over TLS; with `require_client_certificate`, only to clients
  // presenting a certificate issued by the test CA.
  void StartServer(bool require_client_certificate) {
    auto server = std::make_unique<httplib::SSLServer>(
        pki_.server().cert.get(), pki_.server().key.get(),
        require_client_certificate ? pki_.NewCaStore() : nullptr);
    ASSERT_TRUE(server->is_valid());
    server_ = std::make_unique<TestServer>(std::move(server));
    server_->Post(
        "/ok", [](const httplib::Request&, httplib::Response& response) { response.status = 200; });
    server_->Start();
  }

  EndpointOptions Options() const {
    EndpointOptions options;
    options.url = server_->Url("/ok");
    options.connect_timeout_ms = 2000;
    options.timeout_ms = 3000;
    return options;
  }

  TestPki pki_;
  std::unique_ptr<TestServer> server_;
};

TEST_F(EndpointTlsTest, RefusesAnUnknownCertificateByDefault) {
  StartServer(false);
  Endpoint endpoint(Options());
  const Result result = endpoint.Push(AnyMessage());
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_EQ(result.http_status, 0);
  EXPECT_NE(result.error.find("certificate"), std::string::npos) << result.error;
  EXPECT_TRUE(server_->requests().empty());
}

TEST_F(EndpointTlsTest, AcceptsItWithItsCaConfigured) {
  StartServer(false);
  EndpointOptions options = Options();
  options.tls.ca_file = pki_.ca().cert_file;
  Endpoint endpoint(options);
  EXPECT_EQ(endpoint.Push(AnyMessage()).outcome, Outcome::kDelivered);
  EXPECT_EQ(server_->requests().size(), 1u);
}

TEST_F(EndpointTlsTest, InsecureSkipVerifyAcceptsAnything) {
  StartServer(false);
  EndpointOptions options = Options();
  options.tls.insecure_skip_verify = true;
  Endpoint endpoint(options);
  EXPECT_EQ(endpoint.Push(AnyMessage()).outcome, Outcome::kDelivered);
}

TEST_F(EndpointTlsTest, ReusesTheTlsConnection) {
  StartServer(false);
  EndpointOptions options = Options();
  options.tls.ca_file = pki_.ca().cert_file;
  Endpoint endpoint(options);
  for (int i = 0; i < 5; ++i) ASSERT_EQ(endpoint.Push(AnyMessage()).outcome, Outcome::kDelivered);
  EXPECT_EQ(server_->ConnectionCount(), 1u);
}

TEST_F(EndpointTlsTest, MutualTlsNeedsTheClientCertificate) {
  StartServer(true);
  EndpointOptions options = Options();
  options.tls.ca_file = pki_.ca().cert_file;
  {
    Endpoint without_certificate(options);
    EXPECT_EQ(without_certificate.Push(AnyMessage()).outcome, Outcome::kEndpointFailure);
  }
  options.tls.client_cert_file = pki_.client().cert_file;
  options.tls.client_key_file = pki_.client().key_file;
  Endpoint with_certificate(options);
  EXPECT_EQ(with_certificate.Push(AnyMessage()).outcome, Outcome::kDelivered);
  EXPECT_EQ(server_->requests().size(), 1u);
}

}  // namespace
}  // namespace outbox::transport
