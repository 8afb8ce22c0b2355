#include "in_memory.h"

#include <spdlog/logger.h>

namespace outbox::agent {

void LimitToMemory(Options& options, spdlog::logger& log) {
  if (!store::IsInMemoryPath(options.db_path)) return;
  // The watcher waits for inotify events on the file's directory and the
  // archive appends to a file beside it: neither exists. Said, not silent.
  const bool asked = options.watch_external_commits || !options.retention.archive_path.empty();
  options.watch_external_commits = false;
  options.retention.archive_path.clear();
  log.log(asked ? spdlog::level::warn : spdlog::level::info,
          "in-memory database {}: nothing survives this process; no write-ahead log (a writer "
          "keeps readers waiting up to the busy timeout); commit watcher, retention archive and "
          "take-back across processes off",
          options.db_path);
}

}  // namespace outbox::agent
