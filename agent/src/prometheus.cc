// Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/).
#include "prometheus.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <initializer_list>
#include <map>
#include <set>
#include <string_view>
#include <utility>

namespace outbox::agent {
namespace {

using Label = std::pair<std::string_view, std::string_view>;

// Shortest text that reads back as the same double, as Prometheus' own
// clients print it ("0.0005", "2.5", "86400").
std::string FormatDouble(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return std::string(text, result.ptr);
}

// Label values may hold anything a topic name holds; the format allows any
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

class Exposition {
 public:
  void Family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }

  void Sample(std::string_view name, std::initializer_list<Label> labels, std::int64_t value) {
    SampleText(name, labels, std::to_string(value));
  }
  void Sample(std::string_view name, std::initializer_list<Label> labels, double value) {
    SampleText(name, labels, FormatDouble(value));
  }

  std::string Take() { return std::move(out_); }

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

void RenderCounters(Exposition& out, const MetricsSnapshot& snapshot) {
  struct Counter {
    const char* name;
    const char* help;
    std::int64_t TopicCounters::*field;
  };
  static constexpr Counter kCounters[] = {
      {"outbox_enqueued_total", "Messages enqueued through this process.",
       &TopicCounters::enqueued},
      {"outbox_delivered_total", "Messages acknowledged by their endpoint.",
       &TopicCounters::delivered},
      {"outbox_attempt_failures_total", "Failed delivery attempts.",
       &TopicCounters::attempt_failures},
      {"outbox_dead_total", "Messages dead-lettered.", &TopicCounters::dead},
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
  };
  for (const Counter& counter : kCounters) {
    out.Family(counter.name, "counter", counter.help);
    for (const auto& [label, counters] : snapshot.topics) {
      out.Sample(counter.name, {{"topic", label}}, counters.*counter.field);
    }
  }
  out.Family("outbox_taken_back_total", "counter",
             "In-flight messages taken back from agents of this host that no longer run.");
  out.Sample("outbox_taken_back_total", {}, snapshot.taken_back_leases);
  out.Family("outbox_sweeper_errors_total", "counter",
             "Sweeper passes that failed (database or disk errors); see /healthz.");
  out.Sample("outbox_sweeper_errors_total", {}, snapshot.sweeper_errors);
}

void RenderLatency(Exposition& out, const MetricsSnapshot& snapshot) {
  constexpr std::string_view kName = "outbox_delivery_latency_seconds";
  out.Family(kName, "histogram", "Time from commit to acknowledgement, seconds.");
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
             "Age of the oldest pending message, seconds; 0 when none is pending.");
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
  out.Family("outbox_db_bytes", "gauge", "Bytes of used pages in the database file.");
  out.Sample("outbox_db_bytes", {}, snapshot.db.db_bytes);
  out.Family("outbox_wal_bytes", "gauge", "Size of the database's -wal file, bytes.");
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

}  // namespace

std::string RenderPrometheus(const MetricsSnapshot& snapshot, std::int64_t now_ms) {
  Exposition out;
  RenderCounters(out, snapshot);
  RenderLatency(out, snapshot);
  RenderDatabase(out, snapshot, now_ms);
  RenderBreakers(out, snapshot);
  return out.Take();
}

std::string RenderPrometheus(const MetricsSnapshot& snapshot) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return RenderPrometheus(snapshot,
                          std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
}

}  // namespace outbox::agent
