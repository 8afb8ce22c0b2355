#include "util/time_arg.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace outbox::util {
namespace {

constexpr std::int64_t kNow = 1'800'000'000'000;

TEST(ParseDuration, TakesEachUnitAndBareMilliseconds) {
  EXPECT_EQ(ParseDuration("250"), 250);
  EXPECT_EQ(ParseDuration("250ms"), 250);
  EXPECT_EQ(ParseDuration("30s"), 30'000);
  EXPECT_EQ(ParseDuration("30m"), 1'800'000);
  EXPECT_EQ(ParseDuration("2h"), 7'200'000);
  EXPECT_EQ(ParseDuration("7d"), 604'800'000);
}

TEST(ParseDuration, RefusesWhatIsNoDuration) {
  for (const char* bad : {"", "m", "-5m", "+5m", "5x", "5 m", "1.5h", "99999999999999999d"}) {
    EXPECT_THROW(ParseDuration(bad), std::invalid_argument) << bad;
  }
}

TEST(ParseRfc3339, ReadsUtcFractionsAndOffsets) {
  EXPECT_EQ(ParseRfc3339("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(ParseRfc3339("2021-02-26T15:42:10.123Z"), 1'614'354'130'123);
  EXPECT_EQ(ParseRfc3339("2021-02-26T15:42:10.1234567Z"), 1'614'354'130'123);
  EXPECT_EQ(ParseRfc3339("2021-02-26T17:42:10.123+02:00"), 1'614'354'130'123);
  EXPECT_EQ(ParseRfc3339("2021-02-26t14:42:10.123-01:00"), 1'614'354'130'123);
  EXPECT_EQ(ParseRfc3339("1969-12-31T23:59:59.999Z"), -1);
}

TEST(ParseRfc3339, RefusesMalformedAndImpossibleDates) {
  for (const char* bad : {"2021-02-30T00:00:00Z", "2021-02-26", "2021-02-26T15:42:10",
                          "2021-02-26T24:00:00Z", "2021-13-01T00:00:00Z",
                          "2021-02-26T15:42:10Zjunk", "2021-02-26T15:42:10+2:00"}) {
    EXPECT_THROW(ParseRfc3339(bad), std::invalid_argument) << bad;
  }
}

TEST(ParseTimeArg, TakesEpochMillisecondsOffsetsAndRfc3339) {
  EXPECT_EQ(ParseTimeArg("1614354130123", kNow), 1'614'354'130'123);
  EXPECT_EQ(ParseTimeArg("-2h", kNow), kNow - 7'200'000);
  EXPECT_EQ(ParseTimeArg("+30m", kNow), kNow + 1'800'000);
  EXPECT_EQ(ParseTimeArg("2021-02-26T15:42:10.123Z", kNow), 1'614'354'130'123);
}

TEST(ParseTimeArg, NamesTheTextItRefuses) {
  try {
    ParseTimeArg("yesterday", kNow);
    FAIL() << "accepted 'yesterday'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'yesterday'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace outbox::util
