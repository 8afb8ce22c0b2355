#include "util/printable.h"

#include <gtest/gtest.h>

namespace outbox::util {
namespace {

TEST(EscapeControls, LeavesPrintableTextAndUtf8Alone) {
  EXPECT_EQ(EscapeControls("order.created/ünïcode ✓ \\path"), "order.created/ünïcode ✓ \\path");
}

TEST(EscapeControls, EscapesC0C1DelAndBytesThatAreNotUtf8) {
  EXPECT_EQ(EscapeControls("a\nb\r\x1b[2J\x7f"), "a\\x0ab\\x0d\\x1b[2J\\x7f");
  EXPECT_EQ(EscapeControls("\xc2\x9b" "1m"), "\\u009b1m");
  EXPECT_EQ(EscapeControls("\xff\xc3"), "\\xff\\xc3");
  EXPECT_EQ(EscapeControls(std::string("a\0b", 3)), "a\\x00b");
}

}  // namespace
}  // namespace outbox::util
