// Who holds a lease: "host/pid/start/instance", and whether that process
// still runs.
#pragma once

#include <string>
#include <string_view>

namespace outbox::agent {

// A fresh owner id for an agent in this process. The start time (clock ticks
// since boot, from /proc) tells a reused pid from the original process.
std::string NewOwnerId();

// True only when `owner` names a process on this host that no longer runs
// (its pid is gone or belongs to a later process). Owners from other hosts,
// or in a form we do not know, are never declared gone: their leases wait for
// the lease timeout.
bool OwnerIsGone(std::string_view owner);

}  // namespace outbox::agent
