// Times past 2038-01-19T03:14:07Z, where a 32-bit time_t (Debian's armhf)
// ends: every place the project handles time works in 64 bits. These run on
// every architecture, and mean the most on armhf under emulation
// (packaging/dev.sh cross armhf).
#include <gtest/gtest.h>

#include <cstdint>

#include "util/clock.h"
#include "util/http_date.h"
#include "util/rfc3339.h"
#include "util/time_arg.h"

namespace outbox::util {
namespace {

constexpr std::int64_t k2040Ms = 2'208'988'800'000;  // 2040-01-01T00:00:00Z
constexpr std::int64_t kEnd32Ms = 2'147'483'647'000;  // 2038-01-19T03:14:07Z

TEST(Year2038, TheWallClockIsReadWith64BitTime) {
  EXPECT_EQ(WallClockTimeBits(), 64);
  EXPECT_GT(NowMs(), 1'700'000'000'000);  // after 2023: not truncated or wrapped
}

TEST(Year2038, Rfc3339FormatsAndParsesPastTheEnd) {
  EXPECT_EQ(FormatRfc3339(kEnd32Ms + 1000), "2038-01-19T03:14:08.000Z");
  EXPECT_EQ(FormatRfc3339(k2040Ms), "2040-01-01T00:00:00.000Z");
  EXPECT_EQ(ParseRfc3339("2040-01-01T00:00:00Z"), k2040Ms);
  EXPECT_EQ(ParseRfc3339("2106-02-07T06:28:16Z"), 4'294'967'296'000);  // past 32-bit unsigned too
}

TEST(Year2038, TimeArgumentsOffsetPastTheEnd) {
  EXPECT_EQ(ParseTimeArg("+2d", kEnd32Ms), kEnd32Ms + 2 * 86'400'000);
  EXPECT_EQ(ParseTimeArg(std::to_string(k2040Ms), 0), k2040Ms);
}

TEST(Year2038, HttpDatesPastTheEnd) {
  EXPECT_EQ(ParseHttpDate("Sun, 01 Jan 2040 00:00:00 GMT", k2040Ms / 1000), k2040Ms / 1000);
  EXPECT_EQ(ParseHttpDate("Sun Jan  1 00:00:00 2040", 0), k2040Ms / 1000);
  // A two-digit year read from a clock past 2038.
  EXPECT_EQ(ParseHttpDate("Sunday, 01-Jan-40 00:00:00 GMT", k2040Ms / 1000), k2040Ms / 1000);
}

}  // namespace
}  // namespace outbox::util
