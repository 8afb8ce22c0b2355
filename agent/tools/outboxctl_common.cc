#include "outboxctl_common.h"

#include <pwd.h>
#include <unistd.h>

#include <array>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "util/clock.h"
#include "util/printable.h"
#include "util/time_arg.h"
#include "util/utf8.h"

namespace outbox::ctl {

store::Store Open(const Context& context, OpenMode mode) {
  store::Options options;
  options.path = context.db_path;
  options.create = mode == OpenMode::kCreate;
  options.read_only = mode == OpenMode::kReadOnly;
  options.cache_kib = 512;
  if (options.create) {
    // SQLite says only "unable to open database file".
    const std::filesystem::path dir =
        std::filesystem::absolute(context.db_path).parent_path();
    std::error_code error;
    if (!std::filesystem::is_directory(dir, error)) {
      throw std::invalid_argument(context.db_path + ": directory " + dir.string() +
                                  " does not exist (create it first)");
    }
  }
  return store::Store(options);
}

store::Actor CurrentActor() {
  // The real uid decides who acted: SUDO_USER and USER are whatever the
  // caller exported. sudo's SUDO_USER is kept beside the name, marked as
  // the claim it is.
  store::Actor actor;
  const uid_t uid = ::getuid();
  passwd entry{};
  passwd* found = nullptr;
  std::array<char, 4096> buffer{};
  actor.user = ::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found
                   ? std::string(found->pw_name)
                   : "uid " + std::to_string(uid);
  if (const char* sudo = std::getenv("SUDO_USER"); sudo != nullptr && *sudo != '\0') {
    // Bounded and printable: the variable is the caller's to choose.
    std::string claimed = util::ToValidUtf8(std::string_view(sudo).substr(0, 64));
    for (char& c : claimed) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    }
    actor.user += " (SUDO_USER=" + claimed + ")";
  }
  char host[HOST_NAME_MAX + 1] = {};
  actor.host = ::gethostname(host, sizeof host - 1) == 0 ? host : "unknown";
  return actor;
}

double AgeSeconds(std::int64_t now_ms, std::int64_t then_ms) {
  return (static_cast<double>(now_ms) - static_cast<double>(then_ms)) / 1000.0;
}

std::string OneLine(std::string_view text, std::size_t max) {
  const std::string escaped = util::EscapeControls(text);
  if (escaped.size() <= max) return escaped;
  return std::string(util::TruncateUtf8(escaped, max)) + "…";
}

std::string Shown(std::string_view text) { return util::EscapeControls(text); }

store::Status ParseActionStatus(const std::string& name, std::string_view field) {
  if (name == "pending") return store::Status::kPending;
  if (name == "dead") return store::Status::kDead;
  throw std::invalid_argument(std::string(field) + ": expected pending or dead, not '" + name +
                              "'");
}

std::int64_t TimeFlag(std::string_view flag, std::string_view text, std::int64_t now_ms) {
  try {
    return util::ParseTimeArg(text, now_ms);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(flag) + ": " + e.what());
  }
}

std::int64_t DurationFlag(std::string_view flag, std::string_view text) {
  try {
    return util::ParseDuration(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(flag) + ": " + e.what());
  }
}

std::string Rows(std::int64_t n) { return std::to_string(n) + (n == 1 ? " row" : " rows"); }

Progress::Progress(std::string what) : what_(std::move(what)), enabled_(::isatty(2) == 1) {}

Progress::~Progress() {
  if (shown_) std::fputs("\r\033[K", stderr);
}

void Progress::Update(std::int64_t done, std::optional<std::int64_t> total) {
  if (!enabled_) return;
  const std::int64_t now = util::NowMs();
  if (now - last_shown_ms_ < 200) return;  // a terminal needs no more than 5 a second
  last_shown_ms_ = now;
  shown_ = true;
  if (total && *total > 0) {
    std::fprintf(stderr, "\r\033[K%s: %lld of %lld (%d%%)", what_.c_str(),
                 static_cast<long long>(done), static_cast<long long>(*total),
                 static_cast<int>(done * 100 / *total));
  } else {
    std::fprintf(stderr, "\r\033[K%s: %lld", what_.c_str(), static_cast<long long>(done));
  }
  std::fflush(stderr);
}

}  // namespace outbox::ctl
