#include "util/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace outbox::util {
namespace {

TEST(Utf8, SequenceAtMeasuresOneToFourBytes) {
  EXPECT_EQ(Utf8SequenceAt("a", 0), 1u);
  EXPECT_EQ(Utf8SequenceAt("\xC3\xA9", 0), 2u);          // é
  EXPECT_EQ(Utf8SequenceAt("\xE2\x82\xAC", 0), 3u);      // €
  EXPECT_EQ(Utf8SequenceAt("\xF0\x9F\x98\x80", 0), 4u);  // 😀
  EXPECT_EQ(Utf8SequenceAt("x\xC3\xA9", 1), 2u);
}

TEST(Utf8, RefusesOverlongSurrogatesAndAboveU10FFFF) {
  for (const std::string bad : {"\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                                "\xF5\x80\x80\x80", "\x80", "\xFF"}) {
    EXPECT_EQ(Utf8SequenceAt(bad, 0), 0u) << bad;
    EXPECT_FALSE(IsValidUtf8(bad)) << bad;
  }
}

TEST(Utf8, SequenceCutShortAtTheEndIsRefusedWithoutReadingPastIt) {
  const std::string text = "ok\xE2\x82\xAC";
  // A view that ends inside the euro sign.
  const std::string_view cut(text.data(), text.size() - 1);
  EXPECT_EQ(Utf8SequenceAt(cut, 2), 0u);
  EXPECT_FALSE(IsValidUtf8(cut));
  EXPECT_TRUE(IsValidUtf8(text));
  EXPECT_TRUE(IsValidUtf8(""));
}

TEST(Utf8, ToValidReplacesEachBadByteWithReplacementCharacter) {
  EXPECT_EQ(ToValidUtf8("a\xFF" "b\xC3\xA9"), "a\xEF\xBF\xBD" "b\xC3\xA9");
  EXPECT_EQ(ToValidUtf8("\xE2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(ToValidUtf8("plain"), "plain");
}

TEST(Utf8, TruncateNeverCutsInsideASequence) {
  const std::string text = "ab\xE2\x82\xAC" "c";  // a b € c
  EXPECT_EQ(TruncateUtf8(text, 10), text);
  EXPECT_EQ(TruncateUtf8(text, 5), "ab\xE2\x82\xAC");
  EXPECT_EQ(TruncateUtf8(text, 4), "ab");
  EXPECT_EQ(TruncateUtf8(text, 3), "ab");
  EXPECT_EQ(TruncateUtf8(text, 2), "ab");
  EXPECT_EQ(TruncateUtf8(text, 0), "");
  // Not UTF-8: a long run of continuation bytes costs at most 3.
  EXPECT_EQ(TruncateUtf8("a\x80\x80\x80\x80\x80\x80", 6), "a\x80\x80");
}

}  // namespace
}  // namespace outbox::util
