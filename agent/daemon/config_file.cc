#include "config_file.h"

#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "util/safe_file.h"

namespace outbox::daemon {
namespace {

// Secrets are never written inline. The parser still accepts an inline
// credential with a warning (handy in a quick test), but not in a file that
// every user of the machine may read: then the key is named and the start
// (or the reload) is refused. A file readable by its group only
// (root:outbox 0640, as packaged) is fine.
void RefuseWorldReadableInlineSecrets(const std::string& path, const agent::Config& config) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || (st.st_mode & S_IROTH) == 0) return;
  for (const std::string& warning : config.warnings) {
    // config.cc's InlineSecretWarning: "<key path>: secret written inline; ...".
    const auto at = warning.find(": secret written inline");
    if (at == std::string::npos) continue;
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw std::invalid_argument(path + ": " + warning.substr(0, at) +
                                ": secret written inline in a file every user can read (mode " +
                                mode + "); use \"env:NAME\" or \"file:PATH\", or chmod o-r " +
                                path);
  }
}

// A "file:" secret that every user may read (or replace) is no secret. Its
// group may read it (root:outbox 0640, as packaged). Devices and
// directories were refused by the parser already (size, reading).
void RefuseSharedSecretFiles(const std::string& path, const agent::Config& config) {
  for (const std::string& file : config.secret_files) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if ((st.st_mode & (S_IROTH | S_IWOTH)) == 0) continue;
    throw std::invalid_argument(path + ": secret file " + file + ": " +
                                util::DescribeOwnerAndMode(st) + ": " +
                                ((st.st_mode & S_IROTH) != 0 ? "readable" : "writable") +
                                " by every user; chmod o-rw " + file);
  }
}

void RefuseUntrustedConfig(const std::string& path, int fd) {
  // Whoever can change the config chooses the SQL the daemon runs, the URLs
  // and where resolved secrets go: only root and the daemon's own user may.
  const uid_t self = ::geteuid();
  const std::string advice =
      "; the config and its directory must be owned by root" +
      std::string(self == 0 ? "" : " or by outboxd's user (uid " + std::to_string(self) + ")") +
      " and writable by no one else (chown, chmod go-w)";
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw std::invalid_argument(path + ": cannot stat the config");
  if (S_ISDIR(st.st_mode)) throw std::invalid_argument(path + ": cannot read (Is a directory)");
  if (auto why = util::UntrustedWriter(path, st, self)) throw std::invalid_argument(*why + advice);
  // The directory that holds the file the daemon reads (after links): who
  // can write it can put another file in its place.
  std::error_code error;
  const std::filesystem::path real = std::filesystem::canonical(path, error);
  if (error) throw std::invalid_argument(path + ": cannot resolve (" + error.message() + ")");
  const std::string dir = real.parent_path().string();
  if (::stat(dir.c_str(), &st) != 0) throw std::invalid_argument(dir + ": cannot stat");
  if (auto why = util::UntrustedWriter(dir + " (the config's directory)", st, self)) {
    throw std::invalid_argument(*why + advice);
  }
}

std::string ReadAll(const std::string& path, int fd) {
  std::string text;
  std::array<char, 1 << 16> buffer{};
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::invalid_argument(path + ": cannot read (" + std::strerror(errno) + ")");
    if (n == 0) return text;
    text.append(buffer.data(), static_cast<std::size_t>(n));
  }
}

}  // namespace

agent::Config LoadConfigFile(const std::string& path) {
  // One descriptor for the checks and the reading: the file judged is the
  // file read.
  const util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw std::invalid_argument(path + ": cannot read (" + std::strerror(errno) + ")");
  RefuseUntrustedConfig(path, fd.get());
  const std::string text = ReadAll(path, fd.get());
  agent::Config config;
  try {
    config = agent::ParseConfig(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
  RefuseWorldReadableInlineSecrets(path, config);
  RefuseSharedSecretFiles(path, config);
  return config;
}

}  // namespace outbox::daemon
