// An owned file descriptor, closed by its destructor: no path that returns or
// throws leaks one. Move-only; not thread-safe.
#pragma once

#include <unistd.h>

#include <utility>

namespace outbox::util {

class UniqueFd {
 public:
  UniqueFd() = default;
  // Takes `fd` (-1: none).
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  // Gives the descriptor up to the caller (-1 when none).
  int Release() noexcept { return std::exchange(fd_, -1); }
  // Closes the descriptor held (errors ignored: nothing is left to do about
  // them on this path) and takes `fd`.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace outbox::util
