// What an agent on an in-memory database does without (docs/testing.md).
// Not installed.
#pragma once

#include "outbox/agent.h"

namespace spdlog {
class logger;
}

namespace outbox::agent {

// For a db_path that opens no file (store::IsInMemoryPath): turns off what
// needs one (the commit watcher, the retention archive) and says in one log
// line what the agent runs without. Does nothing for a file.
void LimitToMemory(Options& options, spdlog::logger& log);

}  // namespace outbox::agent
