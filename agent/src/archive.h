// The JSON-lines archive of purged delivered rows. Not installed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "outbox/store.h"

namespace outbox::agent {

// One archived row as a JSON object, without the newline: row_json's row
// with its payload in base64 and its message_id.
std::string ArchiveLine(const store::Row& row, const std::string& database_id);

// Appends rows to `path`. Once it has reached `max_bytes` it is rotated:
// compressed (gzip) to PATH.1.gz, the older PATH.i.gz move to PATH.(i+1).gz
// and only the newest `keep` of them stay (0: none). Used by one thread
// (the sweeper).
class ArchiveFile {
 public:
  ArchiveFile(std::string path, std::int64_t max_bytes, int keep = 7)
      : path_(std::move(path)), max_bytes_(max_bytes), keep_(keep) {}

  // Appends one line per row and fsyncs before returning, so that the rows
  // may be deleted afterwards. Throws std::runtime_error naming the file if
  // it cannot be opened, written or synced (then nothing may be deleted).
  void Append(const std::vector<store::Row>& rows, const std::string& database_id);

  const std::string& path() const { return path_; }

 private:
  // Throws std::runtime_error naming the file; the current file is then
  // kept (appended to further), so nothing is lost.
  void Rotate();

  const std::string path_;
  const std::int64_t max_bytes_;
  const int keep_;
};

// PATH.i.gz, the i-th newest rotated archive.
std::string RotatedArchivePath(const std::string& path, int i);

}  // namespace outbox::agent
