#include "retention.h"

#include <spdlog/logger.h>

#include <algorithm>

namespace outbox::agent {

Retention::Retention(Runtime& runtime) : rt_(runtime) {
  const RetentionOptions& options = rt_.options.retention;
  if (!options.archive_path.empty()) {
    archive_ = std::make_unique<ArchiveFile>(options.archive_path, options.archive_max_bytes,
                                             options.archive_keep);
  }
}

int Retention::PurgeBatch(store::Store& reader, std::int64_t cutoff, int batch) {
  int n = 0;
  if (!archive_) {
    rt_.writer->Run([&](store::Store& s) { n = s.PurgeDelivered(cutoff, batch); });
    return n;
  }
  std::vector<store::Row> rows = reader.PeekDelivered(cutoff, batch);
  if (rows.empty()) return 0;
  archive_->Append(rows, rt_.database_id);  // durable before anything is deleted
  std::vector<std::int64_t> ids;
  ids.reserve(rows.size());
  for (const auto& row : rows) ids.push_back(row.id);
  rt_.writer->Run([&](store::Store& s) { s.DeleteDelivered(ids); });
  // Rows archived count as handled even if another connection removed some.
  return static_cast<int>(rows.size());
}

void Retention::Pass(store::Store& reader) {
  if (rt_.options.retention.delivered_ms <= 0) return;
  const std::int64_t cutoff = rt_.clock->WallMs() - rt_.options.retention.delivered_ms;
  int purged = 0;
  for (int i = 0; i < kBatchesPerPass && !rt_.stopping.load(); ++i) {
    const int batch = batch_;
    int n = 0;
    try {
      n = PurgeBatch(reader, cutoff, batch);
      if (n == 0 && archive_) break;
    } catch (const store::StoreError& e) {
      // On a full disk even a DELETE needs room: its pages go to the WAL
      // (all of them where SQLite zeroes deleted content, as Debian's
      // SECURE_DELETE build does). Empty the WAL into the database and
      // try smaller transactions, down to one row, so that purging can
      // free the disk it needs.
      if (!e.full() || batch == 1) throw;
      batch_ = std::max(1, batch / 8);
      rt_.log->warn(
          "retention: disk full while purging {} rows; checkpointing and purging {} at a time",
          batch, batch_);
      try {
        rt_.writer->RunAlone([](store::Store& s) { s.Checkpoint(); });
      } catch (const std::exception&) {  // the smaller batch may still fit
      }
      continue;
    }
    purged += n;
    if (n < batch) break;
    batch_ = std::min(kBatch, batch * 2);
  }
  if (purged == 0) return;
  rt_.log->info("retention purged {} delivered rows", purged);
  // Give the pages back on files that init created (auto_vacuum =
  // INCREMENTAL; a no-op elsewhere) and keep the -wal file small.
  rt_.writer->RunAlone([&](store::Store& s) {
    s.ReclaimFreePages();
    if (rt_.sending.load() == 0) s.Checkpoint();
  });
}

}  // namespace outbox::agent
