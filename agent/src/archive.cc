#include "archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <stdexcept>

#include "outbox/transport.h"
#include "row_json.h"

namespace outbox::agent {
namespace {

// Writes all of `data`, retrying short writes and EINTR.
bool WriteAll(int fd, const char* data, std::size_t left) {
  while (left > 0) {
    const ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

std::string ArchiveLine(const store::Row& row, const std::string& database_id) {
  return row_json::ArchiveLine(row, transport::MessageId(database_id, row.topic, row.key));
}

void ArchiveFile::Append(const std::vector<store::Row>& rows, const std::string& database_id) {
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && st.st_size >= max_bytes_) {
    std::filesystem::rename(path_, path_ + ".1");  // keep one previous file
  }
  std::string text;
  for (const auto& row : rows) {
    text += ArchiveLine(row, database_id);
    text += '\n';
  }
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) throw std::runtime_error("retention.archive_path: cannot open " + path_);
  const bool ok = WriteAll(fd, text.data(), text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("retention.archive_path: cannot write " + path_);
}

}  // namespace outbox::agent
