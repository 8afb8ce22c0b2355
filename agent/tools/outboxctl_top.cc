// `outboxctl top`: a live view of the outbox for an 80×24 terminal (over
// SSH too): per topic pending, in flight, dead, oldest pending age and
// delivery rate, and the breakers the running agents publish. Refreshes
// every second; q quits. Without a terminal (or with --once) it prints one
// screen and exits.
#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <regex>

#include "outboxctl_common.h"
#include "util/clock.h"

namespace outbox::ctl {
namespace {

constexpr int kWidth = 80;
constexpr int kHeight = 24;
// Published state older than this belongs to an agent that is gone.
constexpr std::int64_t kStaleMs = 60'000;
// Topics get the rest of the screen.
constexpr std::size_t kMaxBreakerLines = 8;

struct TopicLine {
  std::int64_t pending = 0;
  std::int64_t in_flight = 0;
  std::int64_t dead = 0;
  std::int64_t oldest_pending = 0;  // created_at; 0: none
  double rate = 0;                  // delivered per second
};

// Raw keyboard input for q, restored on every way out.
class RawTerminal {
 public:
  RawTerminal() : active_(::isatty(0) == 1 && ::tcgetattr(0, &saved_) == 0) {
    if (!active_) return;
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    ::tcsetattr(0, TCSANOW, &raw);
    std::fputs("\033[?25l", stdout);  // hide the cursor
  }
  ~RawTerminal() {
    if (!active_) return;
    ::tcsetattr(0, TCSANOW, &saved_);
    std::fputs("\033[?25h\n", stdout);
    std::fflush(stdout);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;
  bool active() const { return active_; }

  // Waits up to `ms` for a key; true if it was q (or Q, or end of input).
  bool QuitPressed(int ms) const {
    pollfd fd{0, POLLIN, 0};
    if (::poll(&fd, 1, ms) <= 0) return false;
    char c = 0;
    const ssize_t n = ::read(0, &c, 1);
    return n == 0 || c == 'q' || c == 'Q';
  }

 private:
  termios saved_{};
  bool active_;
};

// Sum of each topic label's delivered counter over the live agents.
std::map<std::string, std::int64_t> DeliveredTotals(
    const std::vector<store::Operator::RuntimeEntry>& runtime, std::int64_t now) {
  static const std::regex kPair("\"((?:[^\"\\\\]|\\\\.)*)\":([0-9]+)");
  std::map<std::string, std::int64_t> totals;
  for (const auto& entry : runtime) {
    if (entry.name != "delivered_total" || now - entry.updated_at > kStaleMs) continue;
    for (auto it = std::sregex_iterator(entry.value.begin(), entry.value.end(), kPair);
         it != std::sregex_iterator(); ++it) {
      totals[(*it)[1].str()] += std::stoll((*it)[2].str());
    }
  }
  return totals;
}

std::vector<std::string> Breakers(const std::vector<store::Operator::RuntimeEntry>& runtime,
                                  std::int64_t now) {
  static const std::regex kBreaker(
      "\"endpoint\":\"((?:[^\"\\\\]|\\\\.)*)\",\"state\":\"([a-z_]+)\"");
  std::vector<std::string> lines;
  for (const auto& entry : runtime) {
    if (entry.name != "breakers" || now - entry.updated_at > kStaleMs) continue;
    for (auto it = std::sregex_iterator(entry.value.begin(), entry.value.end(), kBreaker);
         it != std::sregex_iterator(); ++it) {
      lines.push_back((*it)[2].str() + "  " + (*it)[1].str());
    }
  }
  return lines;
}

// "42s", "17m", "5h", "3d": short enough for an 80-column row.
std::string Age(double seconds) {
  struct Unit {
    double below;
    double size;
    const char* suffix;
  };
  static constexpr Unit kUnits[] = {{120, 1, "s"}, {7200, 60, "m"}, {172800, 3600, "h"}};
  if (seconds < 0) return "-";
  char text[32];
  for (const Unit& unit : kUnits) {
    if (seconds < unit.below) {
      std::snprintf(text, sizeof text, "%.0f%s", seconds / unit.size, unit.suffix);
      return text;
    }
  }
  std::snprintf(text, sizeof text, "%.0fd", seconds / 86400);
  return text;
}

class Screen {
 public:
  explicit Screen(const Context& context)
      : store_(Open(context, OpenMode::kReadOnly)), operator_(store_) {}

  // One frame, at most kHeight lines of at most kWidth columns.
  std::string Render() {
    const std::int64_t now = util::NowMs();
    const store::Stats stats = store_.GetStats();
    const auto runtime = operator_.Runtime();
    std::map<std::string, TopicLine> topics;
    for (const auto& count : stats.counts) {
      TopicLine& line = topics[count.topic];
      switch (count.status) {
        case store::Status::kPending:
          line.pending = count.count;
          line.oldest_pending = count.oldest_created_at;
          break;
        case store::Status::kInFlight:
          line.in_flight = count.count;
          break;
        case store::Status::kDead:
          line.dead = count.count;
          break;
        case store::Status::kDelivered:
          break;
      }
    }
    const auto totals = DeliveredTotals(runtime, now);
    if (last_at_ != 0 && now > last_at_) {
      for (const auto& [label, total] : totals) {
        const auto before = last_totals_.find(label);
        if (before == last_totals_.end() || !topics.contains(label)) continue;
        topics[label].rate = static_cast<double>(total - before->second) * 1000.0 /
                             static_cast<double>(now - last_at_);
      }
    }
    last_totals_ = totals;
    last_at_ = now;
    std::int64_t agents = 0;
    for (const auto& entry : runtime) {
      if (entry.name == "last_sweep" && now - entry.updated_at <= kStaleMs) ++agents;
    }

    std::vector<std::string> lines;
    char text[256];
    std::snprintf(text, sizeof text, "outbox %.40s  undelivered %lld  agents %lld  q: quit",
                  OneLine(store_.path(), 40).c_str(), static_cast<long long>(stats.undelivered),
                  static_cast<long long>(agents));
    lines.emplace_back(text);
    lines.emplace_back("");
    std::snprintf(text, sizeof text, "%-30s %9s %9s %9s %8s %9s", "TOPIC", "PENDING", "IN FLIGHT",
                  "DEAD", "OLDEST", "SENT/s");
    lines.emplace_back(text);
    std::vector<std::string> breakers = Breakers(runtime, now);
    if (breakers.size() > kMaxBreakerLines) {
      const std::size_t more = breakers.size() - kMaxBreakerLines + 1;
      breakers.resize(kMaxBreakerLines - 1);
      breakers.push_back("... " + std::to_string(more) + " more breakers");
    }
    // Header (3), a free last line (1), the breakers with their title (2 + n).
    const std::size_t room =
        static_cast<std::size_t>(kHeight) - 4 - (breakers.empty() ? 0 : 2 + breakers.size());
    std::size_t shown = 0;
    for (const auto& [topic, line] : topics) {
      if (shown + 1 >= room && topics.size() > room) {
        std::snprintf(text, sizeof text, "... %zu more topics", topics.size() - shown);
        lines.emplace_back(text);
        break;
      }
      std::snprintf(text, sizeof text, "%-30s %9lld %9lld %9lld %8s %9.1f",
                    OneLine(topic, 30).c_str(), static_cast<long long>(line.pending),
                    static_cast<long long>(line.in_flight), static_cast<long long>(line.dead),
                    line.pending > 0 ? Age(AgeSeconds(now, line.oldest_pending)).c_str() : "-",
                    line.rate);
      lines.emplace_back(text);
      ++shown;
    }
    if (!breakers.empty()) {
      lines.emplace_back("");
      lines.emplace_back("BREAKER    ENDPOINT");
      for (const std::string& breaker : breakers) lines.push_back(breaker);
    }
    std::string frame;
    for (std::size_t i = 0; i < lines.size() && i < static_cast<std::size_t>(kHeight) - 1; ++i) {
      frame += OneLine(lines[i], kWidth);
      frame += "\033[K\n";
    }
    return frame;
  }

 private:
  store::Store store_;
  store::Operator operator_;
  std::map<std::string, std::int64_t> last_totals_;
  std::int64_t last_at_ = 0;
};

int RunTop(const Context& context, bool once) {
  Screen screen(context);
  RawTerminal terminal;
  if (once || !terminal.active()) {
    const std::string frame = screen.Render();
    std::string plain;  // no terminal codes in a pipe
    for (std::size_t at = 0; at < frame.size();) {
      if (frame.compare(at, 3, "\033[K") == 0) {
        at += 3;
      } else {
        plain += frame[at++];
      }
    }
    std::fputs(plain.c_str(), stdout);
    return kExitOk;
  }
  do {
    const std::string frame = screen.Render();
    std::fputs("\033[H", stdout);
    std::fputs(frame.c_str(), stdout);
    std::fputs("\033[J", stdout);
    std::fflush(stdout);
  } while (!terminal.QuitPressed(1000));
  return kExitOk;
}

}  // namespace

void DeclareTopCommands(CLI::App& app, const Context& context, Commands& commands) {
  auto once = std::make_shared<bool>(false);
  auto* top = app.add_subcommand(
      "top", "live view per topic and breaker, refreshed every second (q quits)");
  top->add_flag("--once", *once, "print one screen and exit");
  commands.push_back({top, [&context, once] { return RunTop(context, *once); }});
}

}  // namespace outbox::ctl
