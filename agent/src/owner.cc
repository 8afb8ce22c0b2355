#include "owner.h"

#include <unistd.h>

#include <atomic>
#include <charconv>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

namespace outbox::agent {
namespace {

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

// Field 22 of /proc/PID/stat (starttime), or "" if the process is gone. The
// command name (field 2) may hold spaces and parentheses, so parse after the
// last ')'.
std::string ProcessStartTime(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return {};
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  // After ')' come fields 3, 4, ...; starttime is field 22.
  for (int i = 3; i <= 22 && (fields >> field); ++i) {
  }
  return field;
}

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (;;) {
    const auto end = text.find(separator, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

// This process's start time, read once per process (a forked child reads
// its own). The kernel gives every thread the process's, but qemu-user
// answers /proc/PID/stat for its own PID per emulated thread: read from two
// threads, the two agents of one process took each other for gone.
std::string OwnStartTime() {
  static std::mutex mutex;
  static long read_by = 0;
  static std::string start;
  const long pid = static_cast<long>(::getpid());
  const std::lock_guard lock(mutex);
  if (read_by != pid) {
    start = ProcessStartTime(pid);
    read_by = pid;
  }
  return start;
}

std::string StartTimeOf(long pid) {
  return pid == static_cast<long>(::getpid()) ? OwnStartTime() : ProcessStartTime(pid);
}

}  // namespace

std::string NewOwnerId() {
  static std::atomic<int> instance{0};
  const long pid = static_cast<long>(::getpid());
  return HostName() + "/" + std::to_string(pid) + "/" + OwnStartTime() + "/" +
         std::to_string(instance.fetch_add(1));
}

bool OwnerIsGone(std::string_view owner) {
  const auto parts = Split(owner, '/');
  if (parts.size() != 4 || parts[0] != HostName()) return false;
  long pid = 0;
  const auto [end, error] = std::from_chars(parts[1].data(), parts[1].data() + parts[1].size(), pid);
  if (error != std::errc() || end != parts[1].data() + parts[1].size() || pid <= 0) return false;
  const std::string start = StartTimeOf(pid);
  return start.empty() || start != parts[2];
}

}  // namespace outbox::agent
