#include "util/safe_file.h"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace outbox::util {
namespace {

std::runtime_error Failure(const std::string& what, const std::string& path, int error) {
  return std::runtime_error("cannot " + what + " " + path + " (" + std::strerror(error) + ")");
}

std::string UserName(uid_t uid) {
  passwd entry{};
  passwd* found = nullptr;
  std::array<char, 4096> buffer{};
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
    return found->pw_name;
  }
  return "uid " + std::to_string(uid);
}

}  // namespace

Directory Directory::Of(const std::string& file_path) {
  const auto slash = file_path.rfind('/');
  if (slash == std::string::npos) return Directory(".");
  return Directory(slash == 0 ? "/" : file_path.substr(0, slash));
}

Directory::Directory(std::string path) : path_(std::move(path)) {
  // The directory itself is named by the (trusted) configuration; only the
  // files in it are opened without following links.
  fd_ = UniqueFd(::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd_) throw Failure("open the directory", path_, errno);
}

std::string Directory::Name(const std::string& name) const {
  return path_ == "/" ? "/" + name : path_ + "/" + name;
}

void Directory::CheckOurs(int fd, const std::string& name) const {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Failure("stat", Name(name), errno);
  if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || st.st_nlink != 1) {
    throw std::runtime_error("refusing " + Name(name) + ": not a regular file of this user (" +
                             DescribeOwnerAndMode(st) + ", " + std::to_string(st.st_nlink) +
                             " links); remove it or move it away");
  }
}

UniqueFd Directory::OpenAppend(const std::string& name, mode_t mode) const {
  UniqueFd fd(::openat(fd_.get(), name.c_str(),
                       O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (fd) {
    if (::fchmod(fd.get(), mode) != 0) throw Failure("chmod", Name(name), errno);
    return fd;
  }
  if (errno != EEXIST) throw Failure("create", Name(name), errno);
  fd = UniqueFd(::openat(fd_.get(), name.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) throw Failure("open", Name(name), errno);  // ELOOP: a symbolic link
  CheckOurs(fd.get(), name);
  return fd;
}

UniqueFd Directory::OpenRead(const std::string& name) const {
  UniqueFd fd(::openat(fd_.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) throw Failure("open", Name(name), errno);
  CheckOurs(fd.get(), name);
  return fd;
}

UniqueFd Directory::Create(const std::string& name, mode_t mode) const {
  UniqueFd fd(::openat(fd_.get(), name.c_str(),
                       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!fd) throw Failure("create", Name(name), errno);
  if (::fchmod(fd.get(), mode) != 0) throw Failure("chmod", Name(name), errno);
  return fd;
}

void Directory::Remove(const std::string& name) const {
  if (::unlinkat(fd_.get(), name.c_str(), 0) != 0 && errno != ENOENT) {
    throw Failure("remove", Name(name), errno);
  }
}

void Directory::Rename(const std::string& from, const std::string& to) const {
  if (::renameat(fd_.get(), from.c_str(), fd_.get(), to.c_str()) != 0) {
    throw Failure("rename " + Name(from) + " to", Name(to), errno);
  }
}

bool Directory::Exists(const std::string& name) const {
  struct stat st {};
  return ::fstatat(fd_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

void Directory::Sync() const { ::fsync(fd_.get()); }

std::string DescribeOwnerAndMode(const struct stat& st) {
  std::array<char, 8> mode{};
  std::snprintf(mode.data(), mode.size(), "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return "owner " + UserName(st.st_uid) + " (uid " + std::to_string(st.st_uid) + "), mode " +
         mode.data();
}

std::optional<std::string> UntrustedWriter(const std::string& path, const struct stat& st,
                                           uid_t trusted_uid) {
  std::string why;
  if (st.st_uid != 0 && st.st_uid != trusted_uid) {
    why = "owned by neither root nor " + UserName(trusted_uid);
  } else if ((st.st_mode & S_IWOTH) != 0) {
    why = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) != 0
              ? "writable by every user (the sticky bit does not help)"
              : "writable by every user";
  } else if ((st.st_mode & S_IWGRP) != 0) {
    why = "writable by its group";
  } else {
    return std::nullopt;
  }
  return path + ": " + DescribeOwnerAndMode(st) + ": " + why;
}

}  // namespace outbox::util
