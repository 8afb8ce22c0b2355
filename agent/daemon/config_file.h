// outboxd's configuration file: read, parsed and checked for secrets that
// every user of the machine could read. Internal to the daemon library.
#pragma once

#include <string>

#include "outbox/agent.h"

namespace outbox::daemon {

// Reads the file at `path` and parses it (agent::ParseConfig). Throws
// std::invalid_argument with one line naming the file and the problem: a
// file or directory that someone other than root or the daemon's own user
// could change (owned by another user, or writable by group or others,
// a world-writable directory even with the sticky bit; the line names the
// path, owner and mode), an unreadable file, bad JSON or a bad value, or an
// inline secret in a file that others may read.
agent::Config LoadConfigFile(const std::string& path);

}  // namespace outbox::daemon
