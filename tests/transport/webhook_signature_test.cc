#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "outbox/transport.h"

namespace outbox::transport {
namespace {

// The example published with the Standard Webhooks specification.
constexpr char kSpecSecret[] = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr char kSpecId[] = "msg_p5jXN8AQM9LWM0D4loKWxJek";
constexpr std::int64_t kSpecTimestamp = 1614265330;
constexpr char kSpecBody[] = R"({"test": 2432232314})";
constexpr char kSpecSignature[] = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

// base64 of the 32 bytes "0123456789abcdef0123456789abcdef".
constexpr char kSecondSecret[] = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

std::string ErrorOf(const std::vector<std::string>& secrets) {
  try {
    WebhookSignature(secrets, kSpecId, kSpecTimestamp, kSpecBody);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "";
}

TEST(WebhookSignature, MatchesTheSpecificationsExample) {
  const std::vector<std::string> secrets = {kSpecSecret};
  EXPECT_EQ(WebhookSignature(secrets, kSpecId, kSpecTimestamp, kSpecBody), kSpecSignature);
}

TEST(WebhookSignature, SignsOncePerSecretForKeyRotation) {
  const std::vector<std::string> secrets = {kSpecSecret, kSecondSecret};
  EXPECT_EQ(WebhookSignature(secrets, kSpecId, kSpecTimestamp, kSpecBody),
            std::string(kSpecSignature) + " v1,hK4CWvngkaAwjY1pABLuUbOIkEJjW9tAapq1no4ojG0=");
}

TEST(WebhookSignature, ChangesWithTimestampAndBody) {
  const std::vector<std::string> secrets = {kSpecSecret};
  EXPECT_NE(WebhookSignature(secrets, kSpecId, kSpecTimestamp + 1, kSpecBody), kSpecSignature);
  EXPECT_NE(WebhookSignature(secrets, kSpecId, kSpecTimestamp, "{}"), kSpecSignature);
}

TEST(WebhookSignature, RejectsMalformedSecretsNamingWhichOne) {
  EXPECT_EQ(ErrorOf({kSpecSecret, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}),
            "signing_secrets[1]: must have the form whsec_<base64>");
  EXPECT_EQ(ErrorOf({"whsec_not*base64"}),
            "signing_secrets[0]: the part after whsec_ is not valid base64");
  EXPECT_EQ(ErrorOf({"whsec_c2hvcnQ="}), "signing_secrets[0]: must decode to 24..64 bytes, not 5");
  EXPECT_EQ(ErrorOf({"whsec_"}), "signing_secrets[0]: the part after whsec_ is not valid base64");
}

}  // namespace
}  // namespace outbox::transport
