#include "archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include <array>
#include <cerrno>
#include <filesystem>
#include <stdexcept>

#include "outbox/transport.h"
#include "row_json.h"
#include "util/unique_fd.h"

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

// Compresses `from` into `to` (gzip) and fsyncs it.
void Compress(const std::string& from, const std::string& to) {
  const auto fail = [&](const std::string& what) {
    throw std::runtime_error("retention.archive_path: cannot " + what);
  };
  util::UniqueFd in(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) fail("read " + from);
  gzFile out = ::gzopen(to.c_str(), "wb");
  if (out == nullptr) fail("create " + to);
  std::array<char, 1 << 16> buffer{};
  bool ok = true;
  for (;;) {
    const ssize_t n = ::read(in.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ok = false;
    if (n <= 0) break;
    if (::gzwrite(out, buffer.data(), static_cast<unsigned>(n)) != static_cast<int>(n)) {
      ok = false;
      break;
    }
  }
  in.reset();
  ok = ::gzclose(out) == Z_OK && ok;
  const util::UniqueFd synced(::open(to.c_str(), O_RDONLY | O_CLOEXEC));
  ok = ok && synced.valid() && ::fsync(synced.get()) == 0;
  if (!ok) {
    std::error_code ignored;
    std::filesystem::remove(to, ignored);
    fail("compress " + from + " into " + to);
  }
}

}  // namespace

std::string RotatedArchivePath(const std::string& path, int i) {
  return path + "." + std::to_string(i) + ".gz";
}

void ArchiveFile::Rotate() {
  namespace fs = std::filesystem;
  std::error_code error;
  if (keep_ == 0) {
    fs::remove(path_, error);
    return;
  }
  // The new .1.gz is complete and synced before anything older moves, so a
  // crash in between loses nothing (at worst a file exists twice).
  const std::string fresh = path_ + ".rotating.gz";
  Compress(path_, fresh);
  fs::remove(RotatedArchivePath(path_, keep_), error);
  for (int i = keep_ - 1; i >= 1; --i) {
    if (fs::exists(RotatedArchivePath(path_, i), error)) {
      fs::rename(RotatedArchivePath(path_, i), RotatedArchivePath(path_, i + 1));
    }
  }
  fs::rename(fresh, RotatedArchivePath(path_, 1));
  fs::remove(path_);
}

std::string ArchiveLine(const store::Row& row, const std::string& database_id) {
  return row_json::ArchiveLine(row, transport::MessageId(database_id, row.topic, row.key));
}

void ArchiveFile::Append(const std::vector<store::Row>& rows, const std::string& database_id) {
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && st.st_size >= max_bytes_) Rotate();
  std::string text;
  for (const auto& row : rows) {
    text += ArchiveLine(row, database_id);
    text += '\n';
  }
  const util::UniqueFd fd(::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640));
  if (!fd.valid()) throw std::runtime_error("retention.archive_path: cannot open " + path_);
  const bool ok = WriteAll(fd.get(), text.data(), text.size()) && ::fsync(fd.get()) == 0;
  if (!ok) throw std::runtime_error("retention.archive_path: cannot write " + path_);
}

}  // namespace outbox::agent
