#include "util/base64.h"

#include <gtest/gtest.h>

#include <string>

namespace outbox::util {
namespace {

TEST(Base64, EncodesRfc4648TestVectors) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode(std::string("\0\xFF", 2)), "AP8=");
}

TEST(Base64, DecodeRoundTripsAndKeepsPaddingExact) {
  EXPECT_EQ(Base64Decode("Zg=="), "f");
  EXPECT_EQ(Base64Decode("Zm8="), "fo");
  EXPECT_EQ(Base64Decode("AP8="), std::string("\0\xFF", 2));
}

TEST(Base64, DecodeRefusesAnythingButTheExactForm) {
  for (const char* bad : {"", "Zg", "Zg=", " Zg==", "Zg==\n", "Z*==", "Zm9v-A==", "===="}) {
    EXPECT_FALSE(Base64Decode(bad)) << bad;
  }
}

}  // namespace
}  // namespace outbox::util
