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

// --- verifying, on the receiving side -----------------------------------------

constexpr char kSpecTimestampText[] = "1614265330";

SignatureCheck VerifySpec(std::string_view signature_header, std::int64_t now_s,
                          std::vector<std::string> secrets = {kSpecSecret},
                          std::string_view body = kSpecBody) {
  return VerifyWebhookSignature(secrets, kSpecId, kSpecTimestampText, body, signature_header,
                                now_s, 300);
}

TEST(VerifyWebhookSignature, AcceptsTheSpecificationsExample) {
  EXPECT_EQ(VerifySpec(kSpecSignature, kSpecTimestamp), SignatureCheck::kValid);
}

TEST(VerifyWebhookSignature, AcceptsWhatWebhookSignatureMade) {
  const std::vector<std::string> secrets = {kSecondSecret};
  const std::string header = WebhookSignature(secrets, "id-1", 1700000000, "body");
  EXPECT_EQ(VerifyWebhookSignature(secrets, "id-1", "1700000000", "body", header, 1700000000),
            SignatureCheck::kValid);
}

TEST(VerifyWebhookSignature, AcceptsAnySignatureOfTheListAndAnySecretForRotation) {
  // The sender still signs with the old and the new secret; the receiver
  // knows only the new one, or only the old one.
  const std::string both =
      std::string(kSpecSignature) + " v1,hK4CWvngkaAwjY1pABLuUbOIkEJjW9tAapq1no4ojG0=";
  EXPECT_EQ(VerifySpec(both, kSpecTimestamp, {kSecondSecret}), SignatureCheck::kValid);
  EXPECT_EQ(VerifySpec(both, kSpecTimestamp, {kSpecSecret}), SignatureCheck::kValid);
  // The receiver accepts two secrets; the sender signs with one of them.
  EXPECT_EQ(VerifySpec(kSpecSignature, kSpecTimestamp, {kSecondSecret, kSpecSecret}),
            SignatureCheck::kValid);
  // Other schemes are skipped, not misread.
  EXPECT_EQ(VerifySpec(std::string("v1a,abc ") + kSpecSignature, kSpecTimestamp),
            SignatureCheck::kValid);
}

TEST(VerifyWebhookSignature, RejectsAChangedBodyIdOrTimestamp) {
  EXPECT_EQ(VerifySpec(kSpecSignature, kSpecTimestamp, {kSpecSecret}, R"({"test": 2432232315})"),
            SignatureCheck::kMismatch);
  const std::vector<std::string> secrets = {kSpecSecret};
  EXPECT_EQ(VerifyWebhookSignature(secrets, "msg_other", kSpecTimestampText, kSpecBody,
                                   kSpecSignature, kSpecTimestamp),
            SignatureCheck::kMismatch);
  EXPECT_EQ(VerifyWebhookSignature(secrets, kSpecId, "1614265331", kSpecBody, kSpecSignature,
                                   kSpecTimestamp),
            SignatureCheck::kMismatch);
  EXPECT_EQ(VerifySpec(kSpecSignature, kSpecTimestamp, {kSecondSecret}),
            SignatureCheck::kMismatch);
  EXPECT_EQ(VerifySpec("v1,", kSpecTimestamp), SignatureCheck::kMismatch);
  EXPECT_EQ(VerifySpec("g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", kSpecTimestamp),
            SignatureCheck::kMismatch);
}

TEST(VerifyWebhookSignature, HoldsTheTimestampToTheToleranceBothWays) {
  EXPECT_EQ(VerifySpec(kSpecSignature, kSpecTimestamp + 300), SignatureCheck::kValid);
  EXPECT_EQ(VerifySpec(kSpecSignature, kSpecTimestamp - 300), SignatureCheck::kValid);
  EXPECT_EQ(VerifySpec(kSpecSignature, kSpecTimestamp + 301), SignatureCheck::kTooOld);
  EXPECT_EQ(VerifySpec(kSpecSignature, kSpecTimestamp - 301), SignatureCheck::kTooNew);
  // The time check comes first: a replayed request with a valid signature is
  // still refused.
  const std::vector<std::string> secrets = {kSpecSecret};
  EXPECT_EQ(VerifyWebhookSignature(secrets, kSpecId, "99999999999999999", kSpecBody,
                                   kSpecSignature, kSpecTimestamp),
            SignatureCheck::kTooNew);
}

TEST(VerifyWebhookSignature, ReportsMissingHeadersAndBadTimestampsAsValues) {
  const std::vector<std::string> secrets = {kSpecSecret};
  const auto verify = [&](std::string_view id, std::string_view timestamp,
                          std::string_view signature) {
    return VerifyWebhookSignature(secrets, id, timestamp, kSpecBody, signature, kSpecTimestamp);
  };
  EXPECT_EQ(verify("", kSpecTimestampText, kSpecSignature), SignatureCheck::kMissing);
  EXPECT_EQ(verify(kSpecId, "", kSpecSignature), SignatureCheck::kMissing);
  EXPECT_EQ(verify(kSpecId, kSpecTimestampText, ""), SignatureCheck::kMissing);
  for (const char* bad : {"16142653x0", "-1614265330", " 1614265330", "1614265330.5",
                          "99999999999999999999999"}) {
    EXPECT_EQ(verify(kSpecId, bad, kSpecSignature), SignatureCheck::kBadTimestamp) << bad;
  }
  EXPECT_EQ(SignatureCheckName(SignatureCheck::kTooOld), "too_old");
}

TEST(VerifyWebhookSignature, RejectsBadConfigurationNamingTheField) {
  const auto error = [](std::vector<std::string> secrets, std::int64_t tolerance_s) {
    try {
      VerifyWebhookSignature(secrets, kSpecId, kSpecTimestampText, kSpecBody, kSpecSignature,
                             kSpecTimestamp, tolerance_s);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error({}, 300), "signing_secrets: at least one secret is needed to verify");
  EXPECT_EQ(error({kSpecSecret, "secret"}, 300),
            "signing_secrets[1]: must have the form whsec_<base64>");
  EXPECT_EQ(error({kSpecSecret}, -1), "tolerance_s: must not be negative");
}

}  // namespace
}  // namespace outbox::transport
