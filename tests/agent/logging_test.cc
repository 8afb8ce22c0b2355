// outboxd's log formats against text that other applications wrote.
#include "logging.h"

#include <gtest/gtest.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <sstream>

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

}  // namespace
}  // namespace outbox::daemon
