// Figures 4b and 6: outboxd as a separate process, beside naive_relay (the
// plain C claim → POST → complete loop, polling every millisecond) doing the
// same work on the same kind of file, in the same run.
//
// For each relay: a fresh database; start it (`outboxd --db FILE --config
// FILE`, the config routing topic "bench" to the in-process null sink, metrics
// off, defaults otherwise); let it idle 1.5 s and read its peak RSS (VmHWM in
// /proc/PID/status); then commit rows one at a time from this process (another
// process, for the relay) and time commit → sink acknowledgement; then commit
// 100 000 rows in one transaction and time until the last is delivered; read
// VmHWM again; stop it with SIGTERM and check that it exits 0.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "../common/null_http_server.h"
#include "bench_util.h"

extern char** environ;

namespace outbox::bench {
namespace {

constexpr char kTopic[] = "bench";

class Child {
 public:
  Child(const std::vector<std::string>& args, const std::string& log_path) {
    std::vector<char*> argv;
    for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("cannot start " + args[0]);
  }

  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // Peak resident set size so far, bytes (VmHWM).
  double PeakRss() const {
    std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("VmHWM:", 0) == 0) {
        std::istringstream fields(line.substr(6));
        double kib = 0;
        fields >> kib;
        return kib * 1024;
      }
    }
    throw std::runtime_error("no VmHWM for pid " + std::to_string(pid_));
  }

  // Private anonymous memory now, bytes (RssAnon): what the process costs a
  // device; its shared library pages are shared with every other process.
  double PrivateRss() const {
    std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("RssAnon:", 0) == 0) {
        std::istringstream fields(line.substr(8));
        double kib = 0;
        fields >> kib;
        return kib * 1024;
      }
    }
    return 0;
  }

  bool Running() const { return waitpid(pid_, nullptr, WNOHANG) == 0; }

  // SIGTERM, then waits up to `limit`; the exit status, or -1 if it had to
  // be killed.
  int Terminate(std::chrono::seconds limit) {
    kill(pid_, SIGTERM);
    const auto deadline = SteadyClock::now() + limit;
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (SteadyClock::now() > deadline) return -1;  // the destructor kills it
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = 0;
};

struct RelayResult {
  double idle_rss = 0;
  double busy_rss = 0;
  double idle_private = 0;  // RssAnon
  double busy_private = 0;  // highest RssAnon sampled while delivering
  std::vector<double> latencies_ms;
  double rate = 0;  // messages/s for the 100 000
  double large_private = 0;  // highest RssAnon sampled while delivering the large payloads
  double large_rate = 0;     // messages/s for those
  int exit_status = 0;
};

// The highest RssAnon of `child` while `work` runs, sampled every 2 ms on a
// thread of its own (the work itself blocks in SQLite for long stretches).
double PeakPrivateDuring(const Child& child, const std::function<void()>& work) {
  std::atomic<double> peak{child.PrivateRss()};
  {
    std::jthread sampler([&](std::stop_token stop) {
      while (!stop.stop_requested()) {
        const double now = child.PrivateRss();
        if (now > peak.load()) peak.store(now);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
    work();
  }
  return std::max(peak.load(), child.PrivateRss());
}

void WaitDelivered(RawDb& app, const std::string& name) {
  Statement undelivered =
      app.Prepare(kAnyUndelivered);
  const auto start = SteadyClock::now();
  for (;;) {
    sqlite3_step(undelivered.get());
    const std::int64_t left = sqlite3_column_int64(undelivered.get(), 0);
    sqlite3_reset(undelivered.get());
    if (left == 0) return;
    if (SecondsSince(start) > 240) throw std::runtime_error(name + ": delivery timed out");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

using Launch = std::function<std::vector<std::string>(const std::string& db_path)>;

RelayResult Measure(const std::string& name, const Launch& launch, WorkDir& dir,
                    testing::NullHttpServer& sink, int samples, std::int64_t bulk,
                    std::size_t large_payload) {
  const std::string path = dir.File(name + ".db");
  CreateDatabase(path);
  RawDb app(path);
  app.Exec("PRAGMA synchronous = NORMAL");
  Child child(launch(path), dir.File(name + ".log"));
  RelayResult result;
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the idle period itself
  if (!child.Running()) throw std::runtime_error(name + " exited at start; see its log");
  result.idle_rss = child.PeakRss();
  result.idle_private = child.PrivateRss();

  Statement begin = app.Prepare("BEGIN IMMEDIATE");
  Statement commit = app.Prepare("COMMIT");
  Statement insert = app.Prepare("INSERT INTO outbox(topic, msg_key, payload) VALUES(?1, ?2, ?3)");
  const std::string payload = Payload256(3);
  std::mt19937 random(42);
  std::uniform_int_distribution<int> pause_us(1000, 3000);
  for (int i = -5; i < samples; ++i) {  // the first five warm up
    // Commits arrive at a random phase of the relay's polling or watching,
    // not right behind its previous completion.
    std::this_thread::sleep_for(std::chrono::microseconds(pause_us(random)));
    const std::string key = "lat" + std::to_string(i);
    const std::int64_t before = sink.responses();
    app.Run(begin.get());
    sqlite3_bind_text(insert.get(), 1, kTopic, -1, SQLITE_STATIC);
    sqlite3_bind_text(insert.get(), 2, key.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_blob(insert.get(), 3, payload.data(), static_cast<int>(payload.size()),
                      SQLITE_STATIC);
    app.Run(insert.get());
    const auto start = SteadyClock::now();
    app.Run(commit.get());
    if (!sink.WaitForResponses(before + 1, std::chrono::seconds(10))) {
      throw std::runtime_error(name + ": a committed row was not delivered within 10 s");
    }
    if (i >= 0) {
      result.latencies_ms.push_back(
          std::chrono::duration<double, std::milli>(sink.last_response() - start).count());
    }
  }

  InsertPending(app, kTopic, "bulk", bulk, bulk);  // one transaction
  const auto start = SteadyClock::now();
  Statement undelivered =
      app.Prepare(kAnyUndelivered);
  for (;;) {
    sqlite3_step(undelivered.get());
    const std::int64_t left = sqlite3_column_int64(undelivered.get(), 0);
    sqlite3_reset(undelivered.get());
    result.busy_private = std::max(result.busy_private, child.PrivateRss());
    if (left == 0) break;
    if (SecondsSince(start) > 240) throw std::runtime_error(name + ": delivery timed out");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  result.rate = static_cast<double>(bulk) / SecondsSince(start);
  result.busy_rss = child.PeakRss();

  // The same number of large messages, committed 1 000 per transaction (one
  // transaction of 1.6 GB would measure the application's WAL more than the
  // relay), the clock and the samples running from the first insert.
  const auto large_start = SteadyClock::now();
  result.large_private = PeakPrivateDuring(child, [&] {
    InsertPending(app, kTopic, "large", bulk, 1000, large_payload);
    WaitDelivered(app, name);
  });
  result.large_rate = static_cast<double>(bulk) / SecondsSince(large_start);
  result.exit_status = child.Terminate(std::chrono::seconds(20));
  return result;
}

bool Executable(const std::string& path) { return !path.empty() && ::access(path.c_str(), X_OK) == 0; }

}  // namespace

void RunSidecar(const Settings& settings) {
  const std::string lat50 = "4b latency p50, other process commits → outboxd → sink ack vs naive relay";
  const std::string idle = "6 outboxd peak RSS (VmHWM) idle vs naive relay idle";
  const std::string busy = "6 outboxd peak RSS delivering 100 000 vs naive relay";
  if (!Executable(settings.relay)) throw std::runtime_error("--relay: naive_relay not found");
  if (!Executable(settings.outboxd)) {
    NotMeasured(lat50, "no outboxd binary", "≤ 20 ms");
    NotMeasured(idle, "no outboxd binary", "≤ 12 MiB");
    NotMeasured(busy, "no outboxd binary", "≤ 16 MiB");
    return;
  }
  WorkDir dir(settings.dir);
  testing::NullHttpServer sink;
  const std::string url = sink.Url();
  const int samples = settings.N(300);
  const std::int64_t bulk = settings.N(100'000);

  const std::string config = dir.File("outboxd.json");
  {
    std::ofstream out(config);
    out << R"({"topics": {")" << kTopic << R"(": {"url": ")" << url
        << R"("}}, "metrics": {"listen": ""}, "log": {"level": "warn"}})" << '\n';
  }
  // The naive relay first, then outboxd: each on its own file, one after the
  // other (two relays at once would share the two cores).
  const RelayResult naive = Measure(
      "naive", [&](const std::string& db) { return std::vector<std::string>{settings.relay, db, url, kTopic}; },
      dir, sink, samples, bulk, settings.payload);
  const RelayResult ours = Measure(
      "outboxd",
      [&](const std::string& db) {
        return std::vector<std::string>{settings.outboxd, "--db", db, "--config", config};
      },
      dir, sink, samples, bulk, settings.payload);

  const double p50 = Percentile(ours.latencies_ms, 50), n50 = Percentile(naive.latencies_ms, 50);
  const double p99 = Percentile(ours.latencies_ms, 99), n99 = Percentile(naive.latencies_ms, 99);
  Row(lat50, FormatMs(p50), FormatMs(n50), FormatRatio(p50 / n50), "≤ 20 ms", p50 <= 20);
  Row("4b latency p99, other process commits → outboxd → sink ack vs naive relay", FormatMs(p99),
      FormatMs(n99), FormatRatio(p99 / n99), "", std::nullopt);
  constexpr double kMiB = 1024.0 * 1024.0;
  Row(idle, FormatBytes(ours.idle_rss), FormatBytes(naive.idle_rss),
      FormatRatio(ours.idle_rss / naive.idle_rss), "≤ 12 MiB", ours.idle_rss <= 12 * kMiB);
  Row(busy, FormatBytes(ours.busy_rss), FormatBytes(naive.busy_rss),
      FormatRatio(ours.busy_rss / naive.busy_rss), "≤ 16 MiB", ours.busy_rss <= 16 * kMiB);
  Row("6 outboxd private memory (RssAnon) idle vs naive relay", FormatBytes(ours.idle_private),
      FormatBytes(naive.idle_private), FormatRatio(ours.idle_private / naive.idle_private),
      "≤ 4 MiB", ours.idle_private <= 4 * kMiB);
  Row("6 outboxd private memory (RssAnon, highest sample) delivering 100 000 vs naive relay",
      FormatBytes(ours.busy_private), FormatBytes(naive.busy_private),
      FormatRatio(ours.busy_private / naive.busy_private), "≤ 8 MiB",
      ours.busy_private <= 8 * kMiB);
  const std::string large = FormatBytes(static_cast<double>(settings.payload));
  Row("6 outboxd private memory (RssAnon, highest sample) delivering 100 000 of " + large +
          " vs naive relay",
      FormatBytes(ours.large_private), FormatBytes(naive.large_private),
      FormatRatio(ours.large_private / naive.large_private), "≤ 8 MiB",
      ours.large_private <= 8 * kMiB);
  Row("6 outboxd delivery rate, 100 000 of " + large + " vs naive relay",
      FormatRate(ours.large_rate, "msg/s"), FormatRate(naive.large_rate, "msg/s"),
      FormatRatio(ours.large_rate / naive.large_rate), "", std::nullopt);
  Row("6 outboxd delivery rate, 100 000 committed at once (default config) vs naive relay",
      FormatRate(ours.rate, "msg/s"), FormatRate(naive.rate, "msg/s"),
      FormatRatio(ours.rate / naive.rate), "(naive C ≈ 4 700/s)", std::nullopt);
  Row("6 outboxd stops cleanly on SIGTERM (exit status)", std::to_string(ours.exit_status),
      std::to_string(naive.exit_status), "-", "0", ours.exit_status == 0);
}

}  // namespace outbox::bench
