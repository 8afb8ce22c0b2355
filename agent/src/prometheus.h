// Prometheus rendering with the time passed in, so that ages are testable,
// in both text formats /metrics offers, and the choice between them.
// Internal to the agent component; the public entry point is
// RenderPrometheus(const MetricsSnapshot&) in outbox/agent.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "outbox/agent.h"

namespace outbox::agent {

// As RenderPrometheus(snapshot), with ages computed against `now_ms` (ms
// since the Unix epoch).
std::string RenderPrometheus(const MetricsSnapshot& snapshot, std::int64_t now_ms);

enum class MetricsFormat {
  kPrometheusText,  // text/plain; version=0.0.4
  kOpenMetrics,     // application/openmetrics-text; version=1.0.0
};

// The format an HTTP Accept header asks for: OpenMetrics 1.0.0 when it
// accepts application/openmetrics-text (version 1.0.0 or none) at least as
// much as text/plain; the Prometheus text otherwise, also for a missing or
// unparsable header.
MetricsFormat NegotiateMetricsFormat(std::string_view accept);

// The Content-Type of an answer in `format`.
std::string_view MetricsContentType(MetricsFormat format);

// OpenMetrics 1.0.0 text, ending in "# EOF". Counter families drop the
// "_total" of their samples' names and, like the histogram, add a _created
// sample: `created_ms` (ms since the Unix epoch), when the counting began.
// outbox_dead_total is typed unknown there: a counter family "outbox_dead"
// would clash with the gauge outbox_dead.
std::string RenderOpenMetrics(const MetricsSnapshot& snapshot, std::int64_t now_ms,
                              std::int64_t created_ms);

// `format` at the current time.
std::string RenderMetrics(const MetricsSnapshot& snapshot, MetricsFormat format,
                          std::int64_t created_ms);

}  // namespace outbox::agent
