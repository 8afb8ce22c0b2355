#include "util/time_arg.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace outbox::util {
namespace {

constexpr std::int64_t kNow = 1'780'000'000'000;

TEST(ParseDuration, TakesEveryUnit) {
  EXPECT_EQ(ParseDuration("500ms", "d"), 500);
  EXPECT_EQ(ParseDuration("30s", "d"), 30'000);
  EXPECT_EQ(ParseDuration("30m", "d"), 1'800'000);
  EXPECT_EQ(ParseDuration("2h", "d"), 7'200'000);
  EXPECT_EQ(ParseDuration("7d", "d"), 604'800'000);
}

TEST(ParseDuration, RefusesNoUnitNegativeAndOverflowNamingTheField) {
  for (const char* bad : {"30", "-1h", "1y", "", "h", "99999999999999999d"}) {
    try {
      ParseDuration(bad, "--older-than");
      FAIL() << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--older-than: expected a duration", 0), 0u)
          << e.what();
    }
  }
}

TEST(ParseTimeArg, ReadsRfc3339MillisecondsAndOffsets) {
  EXPECT_EQ(ParseTimeArg("1970-01-01T00:00:01Z", kNow, "t"), 1000);
  EXPECT_EQ(ParseTimeArg("2026-12-01T15:00:00.250Z", kNow, "t"), 1'796'137'200'250);
  EXPECT_EQ(ParseTimeArg("2026-12-01T16:00:00+01:00", kNow, "t"), 1'796'137'200'000);
  EXPECT_EQ(ParseTimeArg("1796137200000", kNow, "t"), 1'796'137'200'000);
  EXPECT_EQ(ParseTimeArg("-2h", kNow, "t"), kNow - 7'200'000);
  EXPECT_EQ(ParseTimeArg("+30m", kNow, "t"), kNow + 1'800'000);
}

TEST(ParseTimeArg, RefusesWhatItCannotRead) {
  for (const char* bad : {"yesterday", "2026-13-01T00:00:00Z", "2026-12-01", "-2", "+x",
                          "2026-12-01T15:00:00", "2026-02-30T00:00:00Z"}) {
    EXPECT_THROW(ParseTimeArg(bad, kNow, "--since"), std::invalid_argument) << bad;
  }
}

}  // namespace
}  // namespace outbox::util
