// Secret references of the configuration: "env:NAME" and "file:PATH".
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "outbox/transport.h"

namespace outbox::transport {

std::string ResolveSecret(std::string_view value, std::string_view field) {
  // Errors name the field and where the secret should have come from, never
  // any part of a secret.
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument(std::string(field) + ": " + why);
  };
  std::string secret;
  if (value.starts_with("env:")) {
    const std::string name(value.substr(4));
    if (name.empty()) fail("\"env:\" needs a variable name");
    const char* found = std::getenv(name.c_str());
    if (found == nullptr) fail("environment variable " + name + " is not set");
    secret = found;
    if (secret.empty()) fail("environment variable " + name + " is empty");
  } else if (value.starts_with("file:")) {
    const std::string path(value.substr(5));
    if (path.empty()) fail("\"file:\" needs a path");
    // A secret is a short token. Reading stops after 64 KiB, so that a
    // config naming /dev/zero or a log file fails instead of eating memory.
    constexpr std::size_t kMaxSecretBytes = 64 * 1024;
    std::ifstream file(path, std::ios::binary);
    if (!file) fail("cannot read file " + path);
    secret.resize(kMaxSecretBytes + 1);
    file.read(secret.data(), static_cast<std::streamsize>(secret.size()));
    if (file.bad()) fail("cannot read file " + path);
    secret.resize(static_cast<std::size_t>(file.gcount()));
    if (secret.size() > kMaxSecretBytes) {
      fail("file " + path + " is larger than 64 KiB: not a secret");
    }
    // Editors and `echo` end files with a newline that is no part of a token.
    while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) {
      secret.pop_back();
    }
    if (secret.empty()) fail("file " + path + " is empty");
  } else {
    secret = value;
  }
  return secret;
}

}  // namespace outbox::transport
