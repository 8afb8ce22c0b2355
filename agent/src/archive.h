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

// Appends rows to `path`, rotating it to PATH.1 (one previous file kept)
// once it has reached `max_bytes`. Used by one thread (the sweeper).
class ArchiveFile {
 public:
  ArchiveFile(std::string path, std::int64_t max_bytes)
      : path_(std::move(path)), max_bytes_(max_bytes) {}

  // Appends one line per row and fsyncs before returning, so that the rows
  // may be deleted afterwards. Throws std::runtime_error naming the file if
  // it cannot be opened, written or synced (then nothing may be deleted).
  void Append(const std::vector<store::Row>& rows, const std::string& database_id);

  const std::string& path() const { return path_; }

 private:
  const std::string path_;
  const std::int64_t max_bytes_;
};

}  // namespace outbox::agent
