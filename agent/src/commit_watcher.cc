#include "commit_watcher.h"

#include <poll.h>
#include <spdlog/logger.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "outbox/store.h"

namespace outbox::agent {
namespace {

// A writer appends its commit frame to the -wal file (our inotify event),
// fsyncs it (synchronous=FULL) and only then publishes it in the
// shared-memory index, which raises no event. An event that data_version
// does not confirm yet is therefore re-checked every poll_ms for this long
// before it is written off. It was 100 ms, and a commit whose fsync took
// longer on a busy disk waited for the sweeper instead (seen in a test on a
// loaded machine); a re-check is one pragma read.
constexpr std::chrono::milliseconds kConfirmWindowMs{3000};

constexpr std::uint32_t kWatchMask = IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE;

void CloseIfOpen(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

CommitWatcher::CommitWatcher(Options options, std::function<void()> on_commit)
    : options_(std::move(options)), on_commit_(std::move(on_commit)) {
  if (options_.poll_ms < 1 || options_.poll_ms > 1000) {
    throw std::invalid_argument("poll_ms: expected an integer from 1 to 1000");
  }
  if (!on_commit_) throw std::invalid_argument("on_commit: must not be empty");

  store::Options store_options;
  store_options.path = options_.db_path;
  store_options.read_only = true;
  store_options.cache_kib = 64;  // it reads one pragma, never a page of data
  store_ = std::make_unique<store::Store>(store_options);
  last_version_ = store_->DataVersion();

  const std::filesystem::path path = std::filesystem::absolute(options_.db_path);
  db_name_ = path.filename().string();
  wal_name_ = db_name_ + "-wal";

  try {
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
    if (!options_.force_polling) {
      inotify_fd_ = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
      const std::string directory = path.parent_path().string();
      if (inotify_fd_ >= 0 &&
          ::inotify_add_watch(inotify_fd_, directory.c_str(), kWatchMask | IN_ONLYDIR) >= 0) {
        mode_ = Mode::kInotify;
      } else {
        // No inotify (some containers, exhausted watch limits): polling
        // keeps the promise, at the cost of one cheap read per interval.
        const int error = errno;
        CloseIfOpen(inotify_fd_);
        if (options_.logger) {
          options_.logger->warn("commit watcher: inotify unavailable ({}); polling every {} ms",
                                std::strerror(error), options_.poll_ms);
        }
      }
    }
    thread_ = std::jthread([this](std::stop_token stop) { Run(std::move(stop)); });
  } catch (...) {
    CloseIfOpen(inotify_fd_);
    CloseIfOpen(wake_fd_);
    throw;
  }
  if (options_.logger) {
    options_.logger->info("commit watcher started mode={} db={}",
                          mode_ == Mode::kInotify ? "inotify" : "polling", options_.db_path);
  }
}

CommitWatcher::~CommitWatcher() {
  thread_.request_stop();
  const std::uint64_t one = 1;
  // Cannot fail short of a closed descriptor: the counter is far from full.
  [[maybe_unused]] const ssize_t written = ::write(wake_fd_, &one, sizeof one);
  thread_.join();
  CloseIfOpen(inotify_fd_);
  CloseIfOpen(wake_fd_);
}

void CommitWatcher::Run(std::stop_token stop) {
  pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {inotify_fd_, POLLIN, 0}};
  const nfds_t count = mode_ == Mode::kInotify ? 2 : 1;
  const int poll_ms = static_cast<int>(options_.poll_ms);
  // While an inotify event waits for data_version to confirm it: re-check
  // until confirm_until.
  bool confirming = false;
  auto confirm_until = std::chrono::steady_clock::time_point::min();

  while (!stop.stop_requested()) {
    const bool timed = mode_ == Mode::kPolling || confirming;
    const int ready = ::poll(fds, count, timed ? poll_ms : -1);
    if (stop.stop_requested()) break;
    if (ready < 0) {
      const int error = errno;
      if (error == EINTR) continue;
      // Only resource exhaustion gets here. Retrying at once would spin; the
      // sweeper still finds every row, just later.
      if (options_.logger) {
        options_.logger->error("commit watcher: poll failed ({}); watching stops",
                               std::strerror(error));
      }
      return;
    }
    bool check = ready == 0;  // a polling interval or a confirmation re-check
    if (count == 2 && (fds[1].revents & POLLIN) != 0 && DrainEvents()) {
      check = true;
      confirming = true;
      confirm_until = std::chrono::steady_clock::now() + kConfirmWindowMs;
    }
    if (!check) continue;
    // A change seen now may be another commit than the one whose event woke
    // us (our own writer's, say), with that one still to be published: keep
    // re-checking for the whole window rather than stopping at the first
    // change, which made outboxd miss commits until the next sweep.
    if (VersionChanged()) Notify();
    if (confirming && std::chrono::steady_clock::now() >= confirm_until) confirming = false;
  }
}

bool CommitWatcher::DrainEvents() {
  alignas(inotify_event) char buffer[4096];
  bool relevant = false;
  for (;;) {
    const ssize_t length = ::read(inotify_fd_, buffer, sizeof buffer);
    if (length <= 0) break;  // EAGAIN: drained
    for (ssize_t offset = 0; offset < length;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + offset);
      offset += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      if ((event->mask & IN_Q_OVERFLOW) != 0) {
        relevant = true;  // events were lost; data_version decides
        continue;
      }
      if (event->len == 0) continue;
      const std::string_view name(event->name);  // NUL-padded
      relevant = relevant || name == db_name_ || name == wal_name_;
    }
  }
  return relevant;
}

bool CommitWatcher::VersionChanged() {
  try {
    const std::int64_t version = store_->DataVersion();
    if (read_failing_ && options_.logger) {
      options_.logger->info("commit watcher: reading data_version works again");
    }
    read_failing_ = false;
    if (version == last_version_) return false;
    last_version_ = version;
    return true;
  } catch (const std::exception& e) {
    // The sweeper still finds the rows; log the first failure of a streak only.
    if (!read_failing_ && options_.logger) {
      options_.logger->error("commit watcher: cannot read data_version: {}", e.what());
    }
    read_failing_ = true;
    return false;
  }
}

void CommitWatcher::Notify() {
  try {
    on_commit_();
  } catch (const std::exception& e) {
    if (options_.logger) options_.logger->error("commit watcher: callback failed: {}", e.what());
  } catch (...) {
    if (options_.logger) options_.logger->error("commit watcher: callback failed");
  }
}

}  // namespace outbox::agent
