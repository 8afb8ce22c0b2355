// Figure 3: delivery throughput, committed rows → acknowledged by a local
// HTTP sink → completion committed; and figure 4a: commit → acknowledgement
// latency on the eager in-process path.
//
// The sink is outbox::testing::NullHttpServer (tests/common): one epoll
// thread in this process that answers every request with an empty 200 and
// parses nothing but the request's length, so that it is not the bottleneck.
//
// Throughput: an Agent runs, idle, on its own file. A sample bulk-inserts N
// pending rows with plain SQL (untimed), then starts the clock, tells the
// agent (NotifyExternalCommit: the sweeper's path, as for rows of another
// application) and stops the clock when the trigger-kept count of undelivered
// rows reaches 0, i.e. when the last completion is committed. The baseline
// posts the same bodies with the same headers to the same sink with raw
// libcurl at the same concurrency (the faster of one thread per transfer and
// one multi handle).
#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <cstdio>
#include <thread>

#include "../common/null_http_server.h"
#include "bench_util.h"
#include "nginx_sink.h"
#include "outbox/agent.h"
#include "outbox/store.h"
#include "raw_curl.h"

namespace outbox::bench {
namespace {

constexpr char kTopic[] = "bench";

std::shared_ptr<spdlog::logger> QuietLogger() {
  auto logger = std::make_shared<spdlog::logger>("outbox",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_level(spdlog::level::err);
  return logger;
}

struct Mode {
  std::string name;
  int workers = 2;                  // requests in flight
  std::size_t batch = 1;            // messages per request
  store::Synchronous synchronous = store::Synchronous::kNormal;
};

// An agent delivering topic kTopic to the sink, on a file of its own.
class DeliveryRig {
 public:
  DeliveryRig(const std::string& path, const std::string& url, const Mode& mode)
      : path_(path), mode_(mode) {
    CreateDatabase(path);
    agent::Options options;
    options.db_path = path;
    options.synchronous = mode.synchronous;
    options.logger = QuietLogger();
    agent::TopicOptions topic;
    topic.endpoint.url = url;
    topic.workers = mode.workers;
    topic.endpoint.batch.max_messages = mode.batch;
    // One claim fills one request in batch mode.
    if (mode.batch > 1) options.claim_batch = static_cast<int>(mode.batch);
    options.topics[kTopic] = topic;
    agent_ = std::make_unique<agent::Agent>(options);
    agent_->Start();
    app_ = std::make_unique<RawDb>(path);
    undelivered_ = app_->Prepare(kAnyUndelivered);
  }

  ~DeliveryRig() { agent_->Stop(std::chrono::seconds(5)); }

  // Messages per second for `n` rows committed before the clock starts.
  double Drain(int n) {
    InsertPending(*app_, kTopic, "m" + std::to_string(next_key_++) + "-", n);
    const auto start = SteadyClock::now();
    agent_->NotifyExternalCommit();
    const auto deadline = start + std::chrono::seconds(120);
    while (Undelivered() > 0) {
      if (SteadyClock::now() > deadline) throw std::runtime_error("delivery: timed out");
      // Paces the polling only; the end time is the first poll that sees 0.
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    return n / SecondsSince(start);
  }

  agent::Agent& agent() { return *agent_; }
  const std::string& database_id() const { return agent_->database_id(); }

 private:
  std::int64_t Undelivered() {
    sqlite3_stmt* q = undelivered_.get();
    if (sqlite3_step(q) != SQLITE_ROW) app_->Fail("read undelivered");
    const std::int64_t value = sqlite3_column_int64(q, 0);
    sqlite3_reset(q);
    return value;
  }

  std::string path_;
  Mode mode_;
  std::unique_ptr<agent::Agent> agent_;
  std::unique_ptr<RawDb> app_;
  Statement undelivered_;
  int next_key_ = 0;
};

// The requests the agent makes for `n` messages: single POSTs, or batches of
// `batch` in NDJSON, each with the headers the transport builds.
std::vector<RawRequest> SameRequests(const std::string& url, const std::string& database_id,
                                     int n, std::size_t batch) {
  transport::EndpointOptions options;
  options.url = url;
  options.batch.max_messages = batch;
  std::vector<std::string> ids, payloads;
  for (int i = 0; i < n; ++i) {
    ids.push_back(transport::MessageId(database_id, kTopic, "k" + std::to_string(i)));
    payloads.push_back(Payload256(i));
  }
  std::vector<RawRequest> requests;
  const std::int64_t now_s = WallMs() / 1000;
  if (batch == 1) {
    for (int i = 0; i < n; ++i) {
      transport::Message m{.message_id = ids[static_cast<std::size_t>(i)], .topic = kTopic,
                           .payload = payloads[static_cast<std::size_t>(i)]};
      std::string body = transport::BuildBody(options, m);
      const transport::Headers headers = transport::BuildHeaders(options, m, body, now_s);
      requests.emplace_back(std::move(body), headers);
    }
    return requests;
  }
  for (std::size_t first = 0; first < static_cast<std::size_t>(n); first += batch) {
    std::vector<transport::Message> members;
    for (std::size_t i = first; i < std::min(first + batch, static_cast<std::size_t>(n)); ++i) {
      members.push_back({.message_id = ids[i], .topic = kTopic, .payload = payloads[i],
                         .created_at_ms = WallMs()});
    }
    std::string body = transport::BuildNdjsonBatch(members);
    const transport::Headers headers =
        transport::BuildBatchHeaders(options, transport::BatchId(members), body, now_s);
    requests.emplace_back(std::move(body), headers);
  }
  return requests;
}

void Throughput(const Settings& settings, WorkDir& dir, testing::NullHttpServer& sink) {
  const std::string url = sink.Url();
  struct Case {
    Mode mode;
    int n;
    const char* figure;
    double target;  // of ours / raw; 0 = none
  };
  const std::vector<Case> cases = {
      {{"1 in flight", 1}, settings.N(5000), "3 delivery, 1 in flight vs raw libcurl loop, 1 in flight", 0},
      {{"8 in flight", 8}, settings.N(15000), "3 delivery, 8 in flight vs raw libcurl, 8 in flight",
       0.6},
      {{"batch", 2, 100}, settings.N(60000),
       "3 delivery, batch mode (100/request, 2 workers) vs raw libcurl, same bodies", 0},
  };
  for (const Case& c : cases) {
    if (!settings.Wanted(c.figure)) continue;
    DeliveryRig rig(dir.File("delivery-" + std::to_string(c.mode.workers) + "-" +
                             std::to_string(c.mode.batch) + ".db"),
                    url, c.mode);
    const std::vector<RawRequest> requests =
        SameRequests(url, rig.database_id(), c.n, c.mode.batch);
    const double per_request = static_cast<double>(c.mode.batch);
    rig.Drain(c.n / 4);  // warm-up: connections, caches
    RawBest(url, requests, c.mode.workers);
    const Paired p = RunPaired(
        settings.reps, [&] { return rig.Drain(c.n); },
        [&] { return RawBest(url, requests, c.mode.workers) * per_request; });
    Row(c.figure, FormatRate(p.ours_median(), "msg/s"), FormatRate(p.baseline_median(), "msg/s"),
        FormatRatio(p.ratio_median()),
        c.target > 0      ? "≥ " + FormatRatio(c.target)
        : c.mode.batch > 1 ? std::string("(info: HTTP is not the limit here)")
                           : std::string("(info; plain C raw ≈ 8 500/s)"),
        c.target > 0 ? std::optional<bool>(p.ratio_median() >= c.target) : std::nullopt);
  }

  // Batch mode against the bare batch claim + complete of figure 2, paired.
  if (settings.Wanted("3 delivery, batch mode vs bare")) {
    Mode mode{"batch", 2, 100};
    const int n = settings.N(60000);
    DeliveryRig rig(dir.File("delivery-batch-vs-bare.db"), url, mode);
    const std::string bare_path = dir.File("bare-batch.db");
    CreateDatabase(bare_path);
    BareCycle bare(bare_path);
    // The whole supply of the run at once; more reps may pass max_pending.
    bare.db().Exec("UPDATE outbox_limits SET max_pending = 0");
    InsertPending(bare.db(), "bare", "b", static_cast<std::int64_t>(n) * (settings.reps + 1));
    rig.Drain(n / 4);
    bare.Batch("bare", n / 400, 100);
    const Paired p = RunPaired(
        settings.reps, [&] { return rig.Drain(n); },
        [&] { return bare.Batch("bare", n / 100, 100); });
    Row("3 delivery, batch mode vs bare batch claim + complete (fig. 2 statements)",
        FormatRate(p.ours_median(), "msg/s"), FormatRate(p.baseline_median(), "rows/s"),
        FormatRatio(p.ratio_median()), "≥ 0.80", p.ratio_median() >= 0.8);
  }

  // synchronous = FULL against NORMAL, 8 in flight, both ours.
  if (settings.Wanted("3 delivery, 8 in flight: synchronous")) {
    const int n = settings.N(10000);
    DeliveryRig normal(dir.File("delivery-normal.db"), url, {"NORMAL", 8});
    DeliveryRig full(dir.File("delivery-full.db"), url,
                     {"FULL", 8, 1, store::Synchronous::kFull});
    normal.Drain(n / 4);
    full.Drain(n / 4);
    const Paired p = RunPaired(
        settings.reps, [&] { return full.Drain(n); }, [&] { return normal.Drain(n); });
    Row("3 delivery, 8 in flight: synchronous=FULL vs NORMAL",
        FormatRate(p.ours_median(), "msg/s"), FormatRate(p.baseline_median(), "msg/s"),
        FormatRatio(p.ratio_median()), "≥ 0.50", p.ratio_median() >= 0.5);
  }
}

// Figure 3 with the sink in another process: 8 in flight against nginx.
void AgainstNginx(const Settings& settings, WorkDir& dir) {
  const std::string figure =
      "3 delivery, 8 in flight, sink in another process (nginx, 204) vs raw libcurl, 8 in flight";
  if (!settings.Wanted(figure)) return;
  std::string why;
  const std::unique_ptr<NginxSink> nginx = NginxSink::Start(dir.path(), why);
  if (!nginx) {
    std::fprintf(stderr, "outbox_bench: skipping \"%s\": %s\n", figure.c_str(), why.c_str());
    NotMeasured(figure, why, "≥ 0.60");
    return;
  }
  const std::string url = nginx->Url();
  const Mode mode{"8 in flight, nginx", 8};
  const int n = settings.N(15000);
  DeliveryRig rig(dir.File("delivery-nginx.db"), url, mode);
  const std::vector<RawRequest> requests = SameRequests(url, rig.database_id(), n, 1);
  rig.Drain(n / 4);
  RawBest(url, requests, mode.workers);
  const Paired p = RunPaired(
      settings.reps, [&] { return rig.Drain(n); },
      [&] { return RawBest(url, requests, mode.workers); });
  Row(figure, FormatRate(p.ours_median(), "msg/s"), FormatRate(p.baseline_median(), "msg/s"),
      FormatRatio(p.ratio_median()), "≥ 0.60", p.ratio_median() >= 0.6);
}

}  // namespace

void RunDelivery(const Settings& settings) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  WorkDir dir(settings.dir);
  {
    testing::NullHttpServer sink;
    Throughput(settings, dir, sink);
  }
  AgainstNginx(settings, dir);
}

// ---------------------------------------------------------------------------
// Figure 4a.

namespace {

// The application's side: one business row plus one message per transaction.
class LatencyRig {
 public:
  LatencyRig(const std::string& path, const std::string& url) : url_(url) {
    CreateDatabase(path);
    agent::Options options;
    options.db_path = path;
    options.logger = QuietLogger();
    agent::TopicOptions topic;
    topic.endpoint.url = url;
    options.topics[kTopic] = topic;
    agent_ = std::make_unique<agent::Agent>(options);
    agent_->Start();
    app_ = std::make_unique<RawDb>(path);
    app_->Exec("PRAGMA synchronous = NORMAL");
    producer_ = std::make_unique<store::Producer>(app_->get());
    order_ = app_->Prepare("INSERT INTO orders(customer, total_cents, body) VALUES(?1, ?2, ?3)");
    raw_insert_ = app_->Prepare("INSERT INTO outbox(topic, msg_key, payload) VALUES(?1, ?2, ?3)");
    begin_ = app_->Prepare("BEGIN IMMEDIATE");
    commit_ = app_->Prepare("COMMIT");
    payload_ = Payload256(7);
  }
  ~LatencyRig() { agent_->Stop(std::chrono::seconds(5)); }

  void InsertOrder() {
    sqlite3_bind_text(order_.get(), 1, "c-77", -1, SQLITE_STATIC);
    sqlite3_bind_int64(order_.get(), 2, 4599);
    sqlite3_bind_blob(order_.get(), 3, payload_.data(), static_cast<int>(payload_.size()),
                      SQLITE_STATIC);
    app_->Run(order_.get());
  }

  // Commit → acknowledgement of `samples` messages through the agent, ms.
  std::vector<double> Ours(testing::NullHttpServer& sink, int samples) {
    std::vector<double> latencies;
    for (int i = 0; i < samples; ++i) {
      const std::int64_t before = sink.responses();
      agent::Transaction txn(agent_.get(), *producer_);
      InsertOrder();
      txn.Enqueue({kTopic, "k" + std::to_string(++key_), payload_, "", {}});
      const auto start = SteadyClock::now();
      txn.Commit();
      if (!sink.WaitForResponses(before + 1, std::chrono::seconds(10))) {
        throw std::runtime_error("latency: no delivery within 10 s");
      }
      latencies.push_back(
          std::chrono::duration<double, std::milli>(sink.last_response() - start).count());
    }
    return latencies;
  }

  // The physical floor: the same commit (a plain INSERT into the outbox),
  // then one raw libcurl POST of the same request on a kept-alive handle.
  std::vector<double> Baseline(testing::NullHttpServer& sink, int samples) {
    std::vector<double> latencies;
    transport::EndpointOptions options;
    options.url = url_;
    RawHandle handle(url_);
    for (int i = 0; i < samples; ++i) {
      const std::string key = "r" + std::to_string(++key_);
      const std::string id = transport::MessageId(agent_->database_id(), kTopic, key);
      transport::Message m{.message_id = id, .topic = kTopic, .payload = payload_};
      const RawRequest request(payload_, transport::BuildHeaders(options, m, payload_, 0));
      app_->Run(begin_.get());
      InsertOrder();
      // A row of another topic, so that the agent leaves it alone.
      sqlite3_bind_text(raw_insert_.get(), 1, "baseline", -1, SQLITE_STATIC);
      sqlite3_bind_text(raw_insert_.get(), 2, key.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_blob(raw_insert_.get(), 3, payload_.data(),
                        static_cast<int>(payload_.size()), SQLITE_STATIC);
      app_->Run(raw_insert_.get());
      const auto start = SteadyClock::now();
      app_->Run(commit_.get());
      handle.Post(request);
      latencies.push_back(
          std::chrono::duration<double, std::milli>(sink.last_response() - start).count());
    }
    return latencies;
  }

 private:
  std::string url_;
  std::unique_ptr<agent::Agent> agent_;
  std::unique_ptr<RawDb> app_;
  std::unique_ptr<store::Producer> producer_;
  Statement order_, raw_insert_, begin_, commit_;
  std::string payload_;
  std::int64_t key_ = 0;
};

}  // namespace

void RunLatency(const Settings& settings) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  WorkDir dir(settings.dir);
  testing::NullHttpServer sink;
  LatencyRig rig(dir.File("latency.db"), sink.Url());
  const int per_block = settings.N(3000) / settings.reps;
  rig.Ours(sink, per_block / 4);
  rig.Baseline(sink, per_block / 4);
  std::vector<double> ours, baseline;
  for (int r = 0; r < settings.reps; ++r) {
    const auto a = r % 2 == 0 ? rig.Ours(sink, per_block) : rig.Baseline(sink, per_block);
    const auto b = r % 2 == 0 ? rig.Baseline(sink, per_block) : rig.Ours(sink, per_block);
    auto& first = r % 2 == 0 ? ours : baseline;
    auto& second = r % 2 == 0 ? baseline : ours;
    first.insert(first.end(), a.begin(), a.end());
    second.insert(second.end(), b.begin(), b.end());
  }
  const double p50 = Percentile(ours, 50), p99 = Percentile(ours, 99);
  const double b50 = Percentile(baseline, 50), b99 = Percentile(baseline, 99);
  Row("4a latency p50, eager in-process: commit → sink ack vs commit + raw POST",
      FormatMs(p50), FormatMs(b50), FormatRatio(p50 / b50), "≤ 1 ms", p50 <= 1.0);
  Row("4a latency p99, eager in-process: commit → sink ack vs commit + raw POST",
      FormatMs(p99), FormatMs(b99), FormatRatio(p99 / b99), "≤ 10 ms", p99 <= 10.0);
}

}  // namespace outbox::bench
