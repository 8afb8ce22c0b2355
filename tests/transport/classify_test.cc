#include <gtest/gtest.h>

#include <limits>

#include "outbox/transport.h"

namespace outbox::transport {
namespace {

constexpr std::int64_t kNowMs = 1'614'265'330'000;  // Thu, 25 Feb 2021 15:02:10 GMT
constexpr std::int64_t kCapMs = 3'600'000;
constexpr int kCurlOk = 0;
constexpr int kCurlCouldntConnect = 7;  // CURLE_COULDNT_CONNECT

Result ClassifyStatus(long status, std::string_view retry_after = "") {
  return Classify(kCurlOk, status, retry_after, kNowMs, kCapMs);
}

TEST(Classify, TwoHundredsAreDelivered) {
  for (long status : {200L, 201L, 202L, 204L, 299L}) {
    const Result result = ClassifyStatus(status);
    EXPECT_EQ(result.outcome, Outcome::kDelivered) << status;
    EXPECT_EQ(result.http_status, status);
    EXPECT_TRUE(result.error.empty());
  }
}

TEST(Classify, EndpointFailuresFollowTheDesign) {
  for (long status : {300L, 301L, 302L, 304L, 307L, 308L, 401L, 403L, 404L, 407L, 408L, 425L, 429L,
                      500L, 501L, 502L, 503L, 504L, 599L}) {
    const Result result = ClassifyStatus(status);
    EXPECT_EQ(result.outcome, Outcome::kEndpointFailure) << status;
    EXPECT_FALSE(result.endpoint_gone) << status;
    EXPECT_EQ(result.error, "HTTP " + std::to_string(status));
  }
}

TEST(Classify, OtherClientErrorsAreMessageFailures) {
  for (long status : {400L, 402L, 405L, 406L, 409L, 411L, 412L, 413L, 414L, 415L, 416L,
                      417L, 418L, 421L, 422L, 423L, 424L, 426L, 428L, 431L, 451L, 499L}) {
    const Result result = ClassifyStatus(status);
    EXPECT_EQ(result.outcome, Outcome::kMessageFailure) << status;
    EXPECT_FALSE(result.endpoint_gone) << status;
  }
}

TEST(Classify, GoneIsPermanentAndMarksTheEndpoint) {
  const Result result = ClassifyStatus(410, "30");
  EXPECT_EQ(result.outcome, Outcome::kMessageFailure);
  EXPECT_TRUE(result.endpoint_gone);
  EXPECT_FALSE(result.retry_after_ms);
}

TEST(Classify, NoFinalStatusIsAnEndpointFailure) {
  for (long status : {0L, 100L, 199L, 600L}) {
    EXPECT_EQ(ClassifyStatus(status).outcome, Outcome::kEndpointFailure) << status;
  }
}

TEST(Classify, CurlErrorsAreEndpointFailuresWithLibcurlsText) {
  const Result result = Classify(kCurlCouldntConnect, 0, "", kNowMs, kCapMs);
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_EQ(result.http_status, 0);
  EXPECT_EQ(result.error, "Couldn't connect to server");
}

TEST(Classify, CurlErrorAfterAStatusIsStillAnEndpointFailure) {
  // e.g. a 200 whose body timed out: the receiver may not have committed.
  const Result result = Classify(28, 200, "", kNowMs, kCapMs);
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_EQ(result.http_status, 200);
}

TEST(Classify, HonoursRetryAfterOnEndpointFailures) {
  EXPECT_EQ(ClassifyStatus(503, "120").retry_after_ms, 120'000);
  EXPECT_EQ(ClassifyStatus(429, "Thu, 25 Feb 2021 15:03:10 GMT").retry_after_ms, 60'000);
  EXPECT_EQ(ClassifyStatus(301, "5").retry_after_ms, 5'000);
}

TEST(Classify, CapsRetryAfter) {
  EXPECT_EQ(ClassifyStatus(503, "86400").retry_after_ms, kCapMs);
  EXPECT_EQ(ClassifyStatus(503, "99999999999999999999999").retry_after_ms, kCapMs);
  EXPECT_EQ(Classify(kCurlOk, 503, "10", kNowMs, 0).retry_after_ms, 0);
}

TEST(Classify, IgnoresRetryAfterWhenAbsentOrMalformedOrPermanent) {
  EXPECT_FALSE(ClassifyStatus(503).retry_after_ms);
  EXPECT_FALSE(ClassifyStatus(503, "soon").retry_after_ms);
  EXPECT_FALSE(ClassifyStatus(400, "10").retry_after_ms);
  EXPECT_FALSE(ClassifyStatus(200, "10").retry_after_ms);
}

TEST(ParseRetryAfter, ReadsDeltaSeconds) {
  EXPECT_EQ(ParseRetryAfter("0", kNowMs), 0);
  EXPECT_EQ(ParseRetryAfter("120", kNowMs), 120'000);
  EXPECT_EQ(ParseRetryAfter(" \t5 ", kNowMs), 5'000);
}

TEST(ParseRetryAfter, SaturatesHugeDeltas) {
  EXPECT_EQ(ParseRetryAfter("99999999999999999999999999", kNowMs),
            std::numeric_limits<std::int64_t>::max());
}

TEST(ParseRetryAfter, ReadsAllThreeHttpDateForms) {
  EXPECT_EQ(ParseRetryAfter("Thu, 25 Feb 2021 15:02:40 GMT", kNowMs), 30'000);     // IMF-fixdate
  EXPECT_EQ(ParseRetryAfter("Thursday, 25-Feb-21 15:02:40 GMT", kNowMs), 30'000);  // RFC 850
  EXPECT_EQ(ParseRetryAfter("Thu Feb 25 15:02:40 2021", kNowMs), 30'000);          // asctime
}

// Debian's armhf has a 32-bit time_t: a date past 2038-01-19 must still be
// read (libcurl's curl_getdate returned -1 for it there).
TEST(ParseRetryAfter, ReadsDatesPast2038) {
  const std::int64_t now_2040 = 2'208'988'800'000;  // 2040-01-01T00:00:00Z
  EXPECT_EQ(ParseRetryAfter("Sun, 01 Jan 2040 00:00:30 GMT", now_2040), 30'000);
  EXPECT_EQ(ParseRetryAfter("Sunday, 01-Jan-40 00:00:30 GMT", now_2040), 30'000);
  EXPECT_EQ(ParseRetryAfter("Sun Jan  1 00:00:30 2040", now_2040), 30'000);
  // From today's clock, a date in 2039 is far ahead, not "invalid".
  EXPECT_GT(ParseRetryAfter("Sat, 01 Jan 2039 00:00:00 GMT", kNowMs).value_or(0),
            500'000'000'000);
}

TEST(ParseRetryAfter, RejectsMalformedDates) {
  for (std::string_view value :
       {"Thu, 25 Feb 2021 15:02:40", "Thu, 30 Feb 2021 15:02:40 GMT", "Thu, 25 Feb 2021 24:00:00 GMT",
        "Thu, 25 Foo 2021 15:02:40 GMT", "Thu Feb 25 15:02:40 21", "Thursday, 25-Feb-2021 15:02:40 GMT",
        "Thu, 25 Feb 2021 15:02:40 GMT trailing"}) {
    EXPECT_FALSE(ParseRetryAfter(value, kNowMs)) << value;
  }
}

TEST(ParseRetryAfter, PastDateMeansNow) {
  EXPECT_EQ(ParseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", kNowMs), 0);
}

TEST(ParseRetryAfter, RejectsAnythingElse) {
  for (std::string_view value : {"", "  ", "-5", "1.5", "+3", "10s", "soon", "0x10"}) {
    EXPECT_FALSE(ParseRetryAfter(value, kNowMs)) << value;
  }
}

TEST(OutcomeName, NamesEveryOutcome) {
  EXPECT_EQ(OutcomeName(Outcome::kDelivered), "delivered");
  EXPECT_EQ(OutcomeName(Outcome::kEndpointFailure), "endpoint_failure");
  EXPECT_EQ(OutcomeName(Outcome::kMessageFailure), "message_failure");
}

}  // namespace
}  // namespace outbox::transport
