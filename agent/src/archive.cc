#include "archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include <array>
#include <cerrno>
#include <stdexcept>

#include "outbox/transport.h"
#include "row_json.h"
#include "util/safe_file.h"

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

// Archives are 0640 whatever the umask (docs/operations.md): they hold
// delivered payloads.
constexpr mode_t kArchiveMode = 0640;

std::string BaseName(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

[[noreturn]] void Fail(const std::string& what) {
  throw std::runtime_error("retention.archive_path: " + what);
}

// Compresses `from` into a new `to` (gzip, created without following a
// link) and fsyncs it. Both are names in `dir`.
void Compress(const util::Directory& dir, const std::string& from, const std::string& to) {
  util::UniqueFd in;
  util::UniqueFd out_fd;
  try {
    in = dir.OpenRead(from);
    dir.Remove(to);  // a leftover of a crash (unlink never follows a link)
    out_fd = dir.Create(to, kArchiveMode);
  } catch (const std::runtime_error& e) {
    Fail(e.what());
  }
  const int synced = ::dup(out_fd.get());
  gzFile out = ::gzdopen(out_fd.Release(), "wb");
  if (out == nullptr) {
    if (synced >= 0) ::close(synced);
    Fail("cannot compress into " + dir.path() + "/" + to);
  }
  std::array<char, 1 << 16> buffer{};
  bool ok = synced >= 0;
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
  ok = ::gzclose(out) == Z_OK && ok;
  ok = ok && ::fsync(synced) == 0;
  if (synced >= 0) ::close(synced);
  if (!ok) {
    try {
      dir.Remove(to);
    } catch (const std::runtime_error&) {  // the compression's failure is the news
    }
    Fail("cannot compress " + from + " into " + to);
  }
}

}  // namespace

std::string RotatedArchivePath(const std::string& path, int i) {
  return path + "." + std::to_string(i) + ".gz";
}

void ArchiveFile::Rotate() {
  const util::Directory dir = util::Directory::Of(path_);
  const std::string name = BaseName(path_);
  if (keep_ == 0) {
    dir.Remove(name);
    return;
  }
  // The new .1.gz is complete and synced before anything older moves, so a
  // crash in between loses nothing (at worst a file exists twice). Renames
  // replace a planted link; they never write through one.
  const std::string fresh = name + ".rotating.gz";
  Compress(dir, name, fresh);
  dir.Remove(BaseName(RotatedArchivePath(path_, keep_)));
  for (int i = keep_ - 1; i >= 1; --i) {
    const std::string older = BaseName(RotatedArchivePath(path_, i));
    if (dir.Exists(older)) dir.Rename(older, BaseName(RotatedArchivePath(path_, i + 1)));
  }
  dir.Rename(fresh, BaseName(RotatedArchivePath(path_, 1)));
  dir.Remove(name);
  dir.Sync();
}

std::string ArchiveLine(const store::Row& row, const std::string& database_id) {
  return row_json::ArchiveLine(row, transport::MessageId(database_id, row.topic, row.key));
}

void ArchiveFile::Append(const std::vector<store::Row>& rows, const std::string& database_id) {
  std::string text;
  for (const auto& row : rows) {
    text += ArchiveLine(row, database_id);
    text += '\n';
  }
  util::UniqueFd fd;
  try {
    const util::Directory dir = util::Directory::Of(path_);
    fd = dir.OpenAppend(BaseName(path_), kArchiveMode);
    struct stat st {};
    if (::fstat(fd.get(), &st) == 0 && st.st_size >= max_bytes_) {
      fd = util::UniqueFd();
      Rotate();
      fd = dir.OpenAppend(BaseName(path_), kArchiveMode);
    }
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    if (what.starts_with("retention.archive_path: ")) throw;
    Fail(path_ + ": " + what);
  }
  if (!WriteAll(fd.get(), text.data(), text.size()) || ::fsync(fd.get()) != 0) {
    Fail("cannot write " + path_);
  }
}

}  // namespace outbox::agent
