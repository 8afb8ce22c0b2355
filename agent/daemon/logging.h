// outboxd's log lines: one logger writing to stderr (the journal under
// systemd), in the text or JSON format the config asks for. Internal to the
// daemon library.
#pragma once

#include <memory>
#include <string>

#include "outbox/agent.h"

namespace spdlog {
class logger;
}

namespace outbox::daemon {

// A logger named `name` on stderr, flushed after every line.
std::shared_ptr<spdlog::logger> MakeStderrLogger(const std::string& name);

// Sets the logger's format (log.format: "text" or "json", one JSON object
// per line) and level (log.level) from `config`. Not thread-safe against a
// concurrent ApplyLogging; logging from other threads meanwhile is fine.
void ApplyLogging(spdlog::logger& logger, const agent::Config& config);

}  // namespace outbox::daemon
