// outboxd's JSON log lines stay JSON whatever bytes a message carries.
#include "logging.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

#include <sstream>

#include "util/utf8.h"

namespace outbox::daemon {
namespace {

// A topic written by another application, with bytes that are not UTF-8
// (a lone continuation byte, a truncated sequence, an overlong slash).
TEST(JsonLogLines, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  std::ostringstream lines;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(lines);
  spdlog::logger logger("json-test", sink);
  agent::Config config;
  config.log_format = "json";
  config.log_level = "info";
  ApplyLogging(logger, config);
  logger.warn("dead-lettered topic={} key={}", std::string("t\x80\xe2\x82"), "k\xc0\xaf\"q");
  logger.flush();
  const std::string line = lines.str();
  ASSERT_FALSE(line.empty());
  EXPECT_TRUE(util::IsValidUtf8(line)) << line;
  rapidjson::Document parsed;
  parsed.Parse<rapidjson::kParseValidateEncodingFlag>(line.data(), line.size() - 1);
  ASSERT_FALSE(parsed.HasParseError()) << line;
  const std::string message = parsed["message"].GetString();
  EXPECT_EQ(message.find("dead-lettered topic=t\xef\xbf\xbd"), 0u) << message;
  EXPECT_NE(message.find("\"q"), std::string::npos) << message;
}

}  // namespace
}  // namespace outbox::daemon
