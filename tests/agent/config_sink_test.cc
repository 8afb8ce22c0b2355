// ParseConfig: the sink options of a topic (compression, rate limits,
// priority), and their errors, each one line naming the key.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "outbox/agent.h"

namespace outbox::agent {
namespace {

std::string ErrorOf(const std::string& json) {
  try {
    ParseConfig(json);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::string Topic(const std::string& url, const std::string& members) {
  return R"({"topics": {"a": {"url": ")" + url + R"(", )" + members + "}}}";
}

TEST(ParseConfigSinks, CompressionDefaultsToNoneAndReadsGzip) {
  const Config plain = ParseConfig(R"({"topics": {"a": {"url": "http://h/"}}})");
  EXPECT_EQ(plain.options.topics.at("a").endpoint.compression, transport::Compression::kNone);
  EXPECT_EQ(plain.options.topics.at("a").endpoint.compress_min_bytes, 1024u);
  const Config gzip = ParseConfig(
      Topic("https://h/", R"("compression": "gzip", "compress_min_bytes": 0)"));
  EXPECT_TRUE(gzip.warnings.empty());
  EXPECT_EQ(gzip.options.topics.at("a").endpoint.compression, transport::Compression::kGzip);
  EXPECT_EQ(gzip.options.topics.at("a").endpoint.compress_min_bytes, 0u);
}

TEST(ParseConfigSinks, BadCompressionNamesTheKey) {
  EXPECT_EQ(ErrorOf(Topic("http://h/", R"("compression": "br")")),
            R"(topics."a".compression: expected one of "none", "gzip", got "br")");
  EXPECT_EQ(ErrorOf(Topic("http://h/", R"("compress_min_bytes": -1)")),
            R"(topics."a".compress_min_bytes: expected an integer from 0 to 67108864, got -1)");
  EXPECT_EQ(ErrorOf(Topic("nats://h/orders", R"("compression": "gzip")")),
            R"(topics."a".compression: only for http and https URLs)");
}

}  // namespace
}  // namespace outbox::agent
