#include "util/rfc3339.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace outbox::util {
namespace {

TEST(Rfc3339, FormatsUtcWithMilliseconds) {
  EXPECT_EQ(FormatRfc3339(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339(1'614'354'130'123), "2021-02-26T15:42:10.123Z");
}

// outboxctl printed "1969-12-31T23:59:59.-01Z" for -1 when it divided
// instead of flooring.
TEST(Rfc3339, NegativeTimesCountBackFromTheEpoch) {
  EXPECT_EQ(FormatRfc3339(-1), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(FormatRfc3339(-1000), "1969-12-31T23:59:59.000Z");
  EXPECT_EQ(FormatRfc3339(-86'400'001), "1969-12-30T23:59:59.999Z");
}

TEST(Rfc3339, ClampsToFourDigitYears) {
  EXPECT_EQ(FormatRfc3339(std::numeric_limits<std::int64_t>::min()), "0000-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339(std::numeric_limits<std::int64_t>::max()), "9999-12-31T23:59:59.999Z");
}

}  // namespace
}  // namespace outbox::util
