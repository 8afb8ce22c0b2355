// outboxd's log formats against text that other applications wrote: text
// lines escape control characters, JSON lines stay JSON whatever the bytes.
#include "logging.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <sstream>

#include "util/utf8.h"

namespace outbox::daemon {
namespace {

// Issue #27: a topic with control characters went raw into text logs: a
// forged log line, or an escape sequence for whoever reads the journal on a
// terminal.
TEST(HostileLogTest, TextLinesEscapeControlCharactersOfTopicsAndKeys) {
  std::ostringstream out;
  spdlog::logger logger("outbox", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  agent::Config config;
  config.log_format = "text";
  ApplyLogging(logger, config);
  logger.warn("expired topic={} key={}", "t\n2026-01-01 00:00:00.000 info forged",
              "k\x1b[2J\xc2\x9b");
  const std::string line = out.str();
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << line;
  EXPECT_EQ(line.find('\x1b'), std::string::npos) << line;
  EXPECT_EQ(line.find("\xc2\x9b"), std::string::npos) << line;
  EXPECT_NE(line.find("topic=t\\x0a2026-01-01"), std::string::npos) << line;
  EXPECT_NE(line.find("key=k\\x1b[2J\\u009b"), std::string::npos) << line;
}

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
