// Files the daemon and outboxctl write in directories others may reach
// (archives, their rotations, migration backups, a new database), and the
// ownership checks of files that decide what the daemon does (its config,
// file: secrets). Internal to edge-outbox; not thread-safe per object.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <optional>
#include <string>

#include "util/unique_fd.h"

namespace outbox::util {

// A directory opened once; the files in it are opened relative to it
// (openat) and never through a symbolic link (O_NOFOLLOW). Every method
// throws std::runtime_error naming the file and the reason.
class Directory {
 public:
  // The directory that holds `file_path` ("." for a bare name).
  static Directory Of(const std::string& file_path);
  explicit Directory(std::string path);

  const std::string& path() const { return path_; }

  // Opens `name` to append, creating it with `mode` (whatever the umask)
  // when missing. An existing one must be a regular file of this process's
  // user with one link: a link planted by someone else is refused, never
  // written through.
  UniqueFd OpenAppend(const std::string& name, mode_t mode) const;
  // Opens an existing `name` to read, under the same conditions.
  UniqueFd OpenRead(const std::string& name) const;
  // Creates `name` anew (O_EXCL) with `mode`, whatever the umask.
  UniqueFd Create(const std::string& name, mode_t mode) const;
  // unlinkat; a missing file is fine.
  void Remove(const std::string& name) const;
  // renameat within the directory (replaces a link, never follows one).
  void Rename(const std::string& from, const std::string& to) const;
  bool Exists(const std::string& name) const;
  // fsync of the directory (makes renames and creations durable).
  void Sync() const;

 private:
  std::string Name(const std::string& name) const;
  void CheckOurs(int fd, const std::string& name) const;

  std::string path_;
  UniqueFd fd_;
};

// Why `st` (of `path`, a file or the directory holding one) lets someone
// other than root or `trusted_uid` change it: a wrong owner, or write
// permission for group or others (a world-writable directory even with the
// sticky bit). nullopt when it is fine. The reason names the path, the
// owner and the mode in one line.
std::optional<std::string> UntrustedWriter(const std::string& path, const struct stat& st,
                                           uid_t trusted_uid);

// "owner alice (uid 1000), mode 0666".
std::string DescribeOwnerAndMode(const struct stat& st);

}  // namespace outbox::util
