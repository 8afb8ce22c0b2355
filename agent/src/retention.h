// Purges delivered rows past their retention, archiving them first when
// configured. Not installed.
#pragma once

#include <memory>

#include "archive.h"
#include "runtime.h"

namespace outbox::agent {

// Runs on the sweeper thread only.
class Retention {
 public:
  explicit Retention(Runtime& runtime);

  // One purge pass: up to kBatchesPerPass transactions. `reader` is the
  // sweeper's read connection (for the rows to archive). Throws store
  // errors (a full disk that even one-row batches cannot get past) and
  // archive errors (then nothing of that batch was deleted).
  void Pass(store::Store& reader);

  static constexpr int kBatch = 500;
  static constexpr int kBatchesPerPass = 20;

 private:
  // Deletes one batch (archived first, when configured); returns how many.
  int PurgeBatch(store::Store& reader, std::int64_t cutoff, int batch);

  Runtime& rt_;
  std::unique_ptr<ArchiveFile> archive_;  // null: no archive
  // Rows per purge transaction: shrinks when the disk is full, grows back.
  int batch_ = kBatch;
};

}  // namespace outbox::agent
