#include "util/listen_address.h"

#include <gtest/gtest.h>

namespace outbox::util {
namespace {

TEST(ParseListenAddress, AcceptsHostPortAndBracketedIpv6) {
  const auto v4 = ParseListenAddress("127.0.0.1:9464");
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 9464);
  const auto v6 = ParseListenAddress("[::1]:0");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 0);
  EXPECT_TRUE(ParseListenAddress("localhost:80"));
  for (const char* bad :
       {"", ":9464", "::1:9464", "[::1]", "host:", "host:x1", "host:123456", "a b:1", "[]:1"}) {
    EXPECT_FALSE(ParseListenAddress(bad)) << bad;
  }
}

}  // namespace
}  // namespace outbox::util
