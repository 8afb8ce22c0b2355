// Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/) and
// OpenMetrics 1.0.0 (https://github.com/OpenObservability/OpenMetrics,
// specification/OpenMetrics.md), from one description of the families.
#include "prometheus.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <map>
#include <set>
#include <string_view>
#include <utility>

#include "util/clock.h"

namespace outbox::agent {
namespace {

using Label = std::pair<std::string_view, std::string_view>;

constexpr std::string_view kTotal = "_total";

// Shortest text that reads back as the same double, as Prometheus' own
// clients print it ("0.0005", "2.5", "86400").
std::string FormatDouble(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return std::string(text, result.ptr);
}

// Label values may hold anything a topic name holds; both formats allow any
// UTF-8 with backslash, double quote and line feed escaped.
void AppendLabelValue(std::string& out, std::string_view value) {
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
}

// Writes families in either format. The differences: OpenMetrics names a
// counter family without "_total" and adds NAME_created samples, may give a
// family's UNIT, and ends with "# EOF".
class Exposition {
 public:
  Exposition(MetricsFormat format, std::int64_t created_ms)
      : open_metrics_(format == MetricsFormat::kOpenMetrics),
        created_(FormatDouble(static_cast<double>(created_ms) / 1000.0)) {}

  // A gauge or histogram family. `unit` (OpenMetrics only) ends its name.
  void Family(std::string_view name, std::string_view type, std::string_view help,
              std::string_view unit = {}) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
    if (open_metrics_ && !unit.empty()) {
      out_ += "# UNIT ";
      out_ += name;
      out_ += ' ';
      out_ += unit;
      out_ += '\n';
    }
  }

  // A counter family, named as its samples are (NAME_total).
  // `clashes_with_gauge`: OpenMetrics' family NAME is a gauge's name too, so
  // there the family is typed unknown and keeps the full name.
  void CounterFamily(std::string_view total_name, std::string_view help,
                     bool clashes_with_gauge = false) {
    counter_created_ = open_metrics_ && !clashes_with_gauge;
    if (!open_metrics_) {
      Family(total_name, "counter", help);
    } else if (clashes_with_gauge) {
      Family(total_name, "unknown", help);
    } else {
      Family(total_name.substr(0, total_name.size() - kTotal.size()), "counter", help);
    }
  }

  // One sample of the last CounterFamily, with its _created in OpenMetrics.
  void CounterSample(std::string_view total_name, std::initializer_list<Label> labels,
                     std::int64_t value) {
    Sample(total_name, labels, value);
    if (counter_created_) {
      Created(total_name.substr(0, total_name.size() - kTotal.size()), labels);
    }
  }

  // NAME_created of a counter or histogram family (OpenMetrics only).
  void Created(std::string_view family, std::initializer_list<Label> labels) {
    if (open_metrics_) SampleText(std::string(family) + "_created", labels, created_);
  }

  void Sample(std::string_view name, std::initializer_list<Label> labels, std::int64_t value) {
    SampleText(name, labels, std::to_string(value));
  }
  void Sample(std::string_view name, std::initializer_list<Label> labels, double value) {
    SampleText(name, labels, FormatDouble(value));
  }

  std::string Take() {
    if (open_metrics_) out_ += "# EOF\n";
    return std::move(out_);
  }

 private:
  void SampleText(std::string_view name, std::initializer_list<Label> labels,
                  const std::string& value) {
    out_ += name;
    if (labels.size() != 0) {
      out_ += '{';
      bool first = true;
      for (const auto& [label, label_value] : labels) {
        if (!first) out_ += ',';
        first = false;
        out_ += label;
        out_ += "=\"";
        AppendLabelValue(out_, label_value);
        out_ += '"';
      }
      out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }

  bool open_metrics_;
  std::string created_;
  bool counter_created_ = false;
  std::string out_;
};

// The database's numbers of one topic label.
struct TopicGauges {
  std::int64_t pending = 0;
  std::int64_t in_flight = 0;
  std::int64_t dead = 0;
  std::int64_t oldest_pending_created_at = 0;  // 0: nothing pending
};

// Database counts by label. A topic without a label of its own (not
// configured) counts as "other", as the counters do: a misbehaving
// application cannot explode the label set through the table either.
std::map<std::string, TopicGauges, std::less<>> GaugesByLabel(const MetricsSnapshot& snapshot) {
  std::map<std::string, TopicGauges, std::less<>> gauges;
  for (const auto& [label, counters] : snapshot.topics) gauges.try_emplace(label);
  for (const store::TopicStatusCount& count : snapshot.db.counts) {
    const bool labelled = snapshot.topics.contains(count.topic);
    TopicGauges& g = gauges[labelled ? count.topic : std::string("other")];
    switch (count.status) {
      case store::Status::kPending:
        g.pending += count.count;
        if (count.count > 0 && (g.oldest_pending_created_at == 0 ||
                                count.oldest_created_at < g.oldest_pending_created_at)) {
          g.oldest_pending_created_at = count.oldest_created_at;
        }
        break;
      case store::Status::kInFlight:
        g.in_flight += count.count;
        break;
      case store::Status::kDead:
        g.dead += count.count;
        break;
      case store::Status::kDelivered:
        break;
    }
  }
  return gauges;
}

std::optional<int> BreakerStateValue(std::string_view state) {
  if (state == "closed") return 0;
  if (state == "half_open") return 1;
  if (state == "open") return 2;
  if (state == "gone") return 3;
  return std::nullopt;
}

// outbox_attempt_failures_total per topic and kind of sink; failures of no
// known kind (none, in the agent) keep the topic-only series.
void RenderAttemptFailures(Exposition& out, std::string_view name, const std::string& topic,
                           const TopicCounters& counters) {
  std::int64_t by_kind = 0;
  for (const auto& [sink, failures] : counters.attempt_failures_by_sink) {
    out.CounterSample(name, {{"topic", topic}, {"sink", sink}}, failures);
    by_kind += failures;
  }
  if (counters.attempt_failures_by_sink.empty() || counters.attempt_failures > by_kind) {
    out.CounterSample(name, {{"topic", topic}}, counters.attempt_failures - by_kind);
  }
}

void RenderCounters(Exposition& out, const MetricsSnapshot& snapshot) {
  struct Counter {
    const char* name;
    const char* help;
    std::int64_t TopicCounters::*field;
    bool clashes_with_gauge = false;
  };
  static constexpr Counter kCounters[] = {
      {"outbox_enqueued_total", "Messages enqueued through this process.",
       &TopicCounters::enqueued},
      {"outbox_delivered_total", "Messages acknowledged by their endpoint.",
       &TopicCounters::delivered},
      {"outbox_attempt_failures_total", "Failed delivery attempts.",
       &TopicCounters::attempt_failures},
      {"outbox_dead_total", "Messages dead-lettered.", &TopicCounters::dead, true},
      {"outbox_recycled_total", "In-flight messages whose lease expired, made pending again.",
       &TopicCounters::recycled},
      {"outbox_pool_rejections_total",
       "Claims reverted to pending because the topic's worker queue was full.",
       &TopicCounters::pool_rejections},
      {"outbox_attempts_saved_total",
       "Endpoint failures that did not cost the message an attempt (endpoint outage).",
       &TopicCounters::attempts_saved},
      {"outbox_crash_budget_deaths_total",
       "Messages dead-lettered because the agent crashed while sending them.",
       &TopicCounters::crash_budget_deaths},
      {"outbox_expired_total",
       "Messages dead-lettered because their expires_at or the topic's ttl_ms passed.",
       &TopicCounters::expired},
  };
  for (const Counter& counter : kCounters) {
    out.CounterFamily(counter.name, counter.help, counter.clashes_with_gauge);
    for (const auto& [label, counters] : snapshot.topics) {
      if (counter.field == &TopicCounters::attempt_failures) {
        RenderAttemptFailures(out, counter.name, label, counters);
      } else {
        out.CounterSample(counter.name, {{"topic", label}}, counters.*counter.field);
      }
    }
  }
  out.CounterFamily("outbox_taken_back_total",
                    "In-flight messages taken back from agents of this host that no longer run.");
  out.CounterSample("outbox_taken_back_total", {}, snapshot.taken_back_leases);
  out.CounterFamily("outbox_sweeper_errors_total",
                    "Sweeper passes that failed (database or disk errors); see /healthz.");
  out.CounterSample("outbox_sweeper_errors_total", {}, snapshot.sweeper_errors);
}

void RenderLatency(Exposition& out, const MetricsSnapshot& snapshot) {
  constexpr std::string_view kName = "outbox_delivery_latency_seconds";
  out.Family(kName, "histogram", "Time from commit to acknowledgement, seconds.", "seconds");
  const std::string bucket = std::string(kName) + "_bucket";
  for (const auto& [label, counters] : snapshot.topics) {
    // The snapshot counts per bucket; the format wants counts up to each bound.
    std::int64_t cumulative = 0;
    for (std::size_t i = 0; i < snapshot.latency_bounds_seconds.size(); ++i) {
      if (i < counters.latency_buckets.size()) cumulative += counters.latency_buckets[i];
      out.Sample(bucket,
                 {{"topic", label}, {"le", FormatDouble(snapshot.latency_bounds_seconds[i])}},
                 cumulative);
    }
    out.Sample(bucket, {{"topic", label}, {"le", "+Inf"}}, counters.latency_count);
    out.Sample(std::string(kName) + "_sum", {{"topic", label}}, counters.latency_sum_seconds);
    out.Sample(std::string(kName) + "_count", {{"topic", label}}, counters.latency_count);
    out.Created(kName, {{"topic", label}});
  }
}

void RenderDatabase(Exposition& out, const MetricsSnapshot& snapshot, std::int64_t now_ms) {
  const auto gauges = GaugesByLabel(snapshot);
  struct Gauge {
    const char* name;
    const char* help;
    std::int64_t TopicGauges::*field;
  };
  static constexpr Gauge kGauges[] = {
      {"outbox_pending", "Messages waiting to be sent.", &TopicGauges::pending},
      {"outbox_in_flight", "Messages leased by an agent and being sent.", &TopicGauges::in_flight},
      {"outbox_dead", "Dead-lettered messages waiting for an operator.", &TopicGauges::dead},
  };
  for (const Gauge& gauge : kGauges) {
    out.Family(gauge.name, "gauge", gauge.help);
    for (const auto& [label, g] : gauges)
      out.Sample(gauge.name, {{"topic", label}}, g.*gauge.field);
  }
  out.Family("outbox_oldest_pending_age_seconds", "gauge",
             "Age of the oldest pending message, seconds; 0 when none is pending.", "seconds");
  for (const auto& [label, g] : gauges) {
    // In doubles: created_at holds whatever another application wrote, and
    // now - INT64_MIN overflows.
    const double age_ms =
        g.pending == 0 ? 0.0
                       : std::max(0.0, static_cast<double>(now_ms) -
                                           static_cast<double>(g.oldest_pending_created_at));
    out.Sample("outbox_oldest_pending_age_seconds", {{"topic", label}}, age_ms / 1000.0);
  }

  out.Family("outbox_unrouted_pending", "gauge",
             "Pending messages whose topic has no route in the configuration.");
  out.Sample("outbox_unrouted_pending", {}, snapshot.unrouted_pending);
  out.Family("outbox_quarantined_unrouted", "gauge",
             "Messages taken back from a crashed agent whose topic has no route: they wait "
             "for one, holding no other topic up.");
  out.Sample("outbox_quarantined_unrouted", {}, snapshot.quarantined_unrouted);
  out.Family("outbox_blocked_keys", "gauge",
             "Ordering keys whose oldest undelivered message is dead or not yet due while "
             "later messages of the key wait.");
  out.Sample("outbox_blocked_keys", {}, snapshot.blocked_keys);
  out.Family("outbox_db_bytes", "gauge", "Bytes of used pages in the database file.", "bytes");
  out.Sample("outbox_db_bytes", {}, snapshot.db.db_bytes);
  out.Family("outbox_wal_bytes", "gauge", "Size of the database's -wal file, bytes.", "bytes");
  out.Sample("outbox_wal_bytes", {}, snapshot.db.wal_bytes);

  // 1 means the next insert fails. A limit that is off has no sample.
  out.Family("outbox_limit_ratio", "gauge",
             "Usage of each configured limit as a fraction of it (1 = full).");
  const std::pair<const char*, std::pair<std::int64_t, std::int64_t>> limits[] = {
      {"max_pending", {snapshot.db.undelivered, snapshot.db.limits.max_pending}},
      {"max_db_bytes", {snapshot.db.db_bytes, snapshot.db.limits.max_db_bytes}},
  };
  for (const auto& [name, usage] : limits) {
    const auto [used, limit] = usage;
    if (limit > 0) {
      out.Sample("outbox_limit_ratio", {{"limit", name}},
                 static_cast<double>(used) / static_cast<double>(limit));
    }
  }
}

void RenderBreakers(Exposition& out, const MetricsSnapshot& snapshot) {
  out.Family("outbox_breaker_state", "gauge",
             "Circuit breaker per endpoint: 0 closed, 1 half open, 2 open, 3 gone (HTTP 410).");
  for (const BreakerState& breaker : snapshot.breakers) {
    if (const auto value = BreakerStateValue(breaker.state)) {
      out.Sample("outbox_breaker_state", {{"endpoint", breaker.endpoint}},
                 static_cast<std::int64_t>(*value));
    }
  }
  out.Family("outbox_breaker_consecutive_failures", "gauge",
             "Endpoint failures in a row per endpoint.");
  for (const BreakerState& breaker : snapshot.breakers) {
    out.Sample("outbox_breaker_consecutive_failures", {{"endpoint", breaker.endpoint}},
               static_cast<std::int64_t>(breaker.consecutive_failures));
  }
}

void RenderAll(Exposition& out, const MetricsSnapshot& snapshot, std::int64_t now_ms) {
  RenderCounters(out, snapshot);
  RenderLatency(out, snapshot);
  RenderDatabase(out, snapshot, now_ms);
  RenderBreakers(out, snapshot);
}

std::string_view Trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

// One media range of an Accept header: its type, version parameter and q.
struct MediaRange {
  std::string_view type;
  std::string_view version;
  double q = 1.0;
};

MediaRange ParseMediaRange(std::string_view text) {
  MediaRange range;
  std::size_t semicolon = text.find(';');
  range.type = Trim(text.substr(0, semicolon));
  while (semicolon != std::string_view::npos) {
    text.remove_prefix(semicolon + 1);
    semicolon = text.find(';');
    const std::string_view parameter = Trim(text.substr(0, semicolon));
    const std::size_t equals = parameter.find('=');
    if (equals == std::string_view::npos) continue;
    const std::string_view name = Trim(parameter.substr(0, equals));
    std::string_view value = Trim(parameter.substr(equals + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    if (EqualsIgnoringCase(name, "version")) {
      range.version = value;
    } else if (EqualsIgnoringCase(name, "q")) {
      double q = 0;
      const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), q);
      // A q that does not parse counts as 0: that range is not chosen.
      range.q = error == std::errc() && end == value.data() + value.size() && q >= 0 && q <= 1
                    ? q
                    : 0.0;
    }
  }
  return range;
}

}  // namespace

MetricsFormat NegotiateMetricsFormat(std::string_view accept) {
  double open_metrics_q = 0;
  double text_q = 0;
  while (!accept.empty()) {
    const std::size_t comma = accept.find(',');
    const MediaRange range = ParseMediaRange(accept.substr(0, comma));
    accept.remove_prefix(comma == std::string_view::npos ? accept.size() : comma + 1);
    if (EqualsIgnoringCase(range.type, "application/openmetrics-text")) {
      if (range.version.empty() || range.version == "1.0.0") {
        open_metrics_q = std::max(open_metrics_q, range.q);
      }
    } else if (EqualsIgnoringCase(range.type, "text/plain") ||
               EqualsIgnoringCase(range.type, "text/*") || range.type == "*/*") {
      text_q = std::max(text_q, range.q);
    }
  }
  return open_metrics_q > 0 && open_metrics_q >= text_q ? MetricsFormat::kOpenMetrics
                                                        : MetricsFormat::kPrometheusText;
}

std::string_view MetricsContentType(MetricsFormat format) {
  return format == MetricsFormat::kOpenMetrics
             ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
             : "text/plain; version=0.0.4; charset=utf-8";
}

std::string RenderPrometheus(const MetricsSnapshot& snapshot, std::int64_t now_ms) {
  Exposition out(MetricsFormat::kPrometheusText, 0);
  RenderAll(out, snapshot, now_ms);
  return out.Take();
}

std::string RenderOpenMetrics(const MetricsSnapshot& snapshot, std::int64_t now_ms,
                              std::int64_t created_ms) {
  Exposition out(MetricsFormat::kOpenMetrics, created_ms);
  RenderAll(out, snapshot, now_ms);
  return out.Take();
}

std::string RenderMetrics(const MetricsSnapshot& snapshot, MetricsFormat format,
                          std::int64_t created_ms) {
  return format == MetricsFormat::kOpenMetrics
             ? RenderOpenMetrics(snapshot, util::NowMs(), created_ms)
             : RenderPrometheus(snapshot, util::NowMs());
}

std::string RenderPrometheus(const MetricsSnapshot& snapshot) {
  return RenderPrometheus(snapshot, util::NowMs());
}

}  // namespace outbox::agent
