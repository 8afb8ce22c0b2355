// Prometheus rendering with the time passed in, so that ages are testable.
// Internal to the agent component; the public entry point is
// RenderPrometheus(const MetricsSnapshot&) in outbox/agent.h.
#pragma once

#include <cstdint>
#include <string>

#include "outbox/agent.h"

namespace outbox::agent {

// As RenderPrometheus(snapshot), with ages computed against `now_ms` (ms
// since the Unix epoch).
std::string RenderPrometheus(const MetricsSnapshot& snapshot, std::int64_t now_ms);

}  // namespace outbox::agent
