#include "logging.h"

#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "util/printable.h"
#include "util/utf8.h"

namespace outbox::daemon {
namespace {

// %* in the JSON pattern: the message as the inside of a JSON string.
class JsonEscapedMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& message, const std::tm& /*time*/,
              spdlog::memory_buf_t& out) override {
    // Topics, keys and errors come from other applications' rows and from
    // receivers: bytes that are not UTF-8 would make the line invalid JSON.
    const std::string_view payload(message.payload.data(), message.payload.size());
    std::string repaired;
    if (!util::IsValidUtf8(payload)) repaired = util::ToValidUtf8(payload);
    for (char c : repaired.empty() ? payload : std::string_view(repaired)) {
      const auto byte = static_cast<unsigned char>(c);
      if (c == '"' || c == '\\') {
        out.push_back('\\');
        out.push_back(c);
      } else if (byte < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\u%04x", byte);
        out.append(escaped, escaped + 6);
      } else {
        out.push_back(c);
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonEscapedMessage>();
  }
};

// %& in the text pattern: the message with control characters escaped, so
// that a topic, key or error another application wrote can neither forge a
// log line nor send a terminal escape sequence (util::EscapeControls).
class ControlEscapedMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& message, const std::tm& /*time*/,
              spdlog::memory_buf_t& out) override {
    std::string escaped;
    util::AppendEscapedControls(std::string_view(message.payload.data(), message.payload.size()),
                                escaped);
    out.append(escaped.data(), escaped.data() + escaped.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<ControlEscapedMessage>();
  }
};

}  // namespace

std::shared_ptr<spdlog::logger> MakeStderrLogger(const std::string& name) {
  auto logger =
      std::make_shared<spdlog::logger>(name, std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->flush_on(spdlog::level::trace);  // stderr goes to the journal line by line
  return logger;
}

void ApplyLogging(spdlog::logger& logger, const agent::Config& config) {
  if (config.log_format == "json") {
    auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    formatter->add_flag<JsonEscapedMessage>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","logger":"%n","message":"%*"})");
    logger.set_formatter(std::move(formatter));
  } else {
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<ControlEscapedMessage>('&').set_pattern("%Y-%m-%d %H:%M:%S.%e %l %&");
    logger.set_formatter(std::move(formatter));
  }
  logger.set_level(spdlog::level::from_str(config.log_level));
}

}  // namespace outbox::daemon
