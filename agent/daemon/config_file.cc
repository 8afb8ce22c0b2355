#include "config_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

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

}  // namespace

agent::Config LoadConfigFile(const std::string& path) {
  const auto unreadable = [&] {
    return std::invalid_argument(path + ": cannot read (" + std::strerror(errno) + ")");
  };
  std::ifstream file(path, std::ios::binary);
  if (!file) throw unreadable();
  std::string text;
  try {
    // A directory opens fine and fails only on reading, by throwing.
    text.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure&) {
    throw unreadable();
  }
  if (file.bad()) throw unreadable();
  agent::Config config;
  try {
    config = agent::ParseConfig(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
  RefuseWorldReadableInlineSecrets(path, config);
  return config;
}

}  // namespace outbox::daemon
