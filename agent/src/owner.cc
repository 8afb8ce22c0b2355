#include "owner.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
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
//
// The file is opened relative to a descriptor of /proc, never as
// "/proc/PID/stat": qemu-user rewrites that path for its own PID and answers
// with a start time of its own per emulated thread, so under emulation an
// owner's id and what another process reads of it disagreed, and live
// owners were taken for gone. Read this way, every process gets the kernel's
// figure, natively and under qemu-user alike.
std::string ProcessStartTime(long pid) {
  const int proc = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc < 0) return {};
  const int fd = ::openat(proc, (std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  ::close(proc);
  if (fd < 0) return {};
  std::array<char, 4096> buffer{};  // a stat line is a few hundred bytes
  std::size_t size = 0;
  for (;;) {
    const ssize_t got = ::read(fd, buffer.data() + size, buffer.size() - size);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    size += static_cast<std::size_t>(got);
    if (size == buffer.size()) break;
  }
  ::close(fd);
  const std::string stat(buffer.data(), size);
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

}  // namespace

std::string NewOwnerId() {
  static std::atomic<int> instance{0};
  const long pid = static_cast<long>(::getpid());
  return HostName() + "/" + std::to_string(pid) + "/" + ProcessStartTime(pid) + "/" +
         std::to_string(instance.fetch_add(1));
}

bool OwnerIsGone(std::string_view owner) {
  const auto parts = Split(owner, '/');
  if (parts.size() != 4 || parts[0] != HostName()) return false;
  long pid = 0;
  const auto [end, error] = std::from_chars(parts[1].data(), parts[1].data() + parts[1].size(), pid);
  if (error != std::errc() || end != parts[1].data() + parts[1].size() || pid <= 0) return false;
  const std::string start = ProcessStartTime(pid);
  return start.empty() || start != parts[2];
}

}  // namespace outbox::agent
