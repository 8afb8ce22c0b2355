// A SQLite VFS that counts the bytes written to database files and to their
// write-ahead logs (xWrite calls: what reaches the flash, page by page), and
// passes every call on to the default unix VFS. Registered as the process's
// default VFS, so every connection goes through it. Thread-safe counters.
#pragma once

#include <cstdint>

namespace outbox::bench {

struct WrittenBytes {
  std::int64_t db = 0;
  std::int64_t wal = 0;
  std::int64_t total() const { return db + wal; }
};

// Registers the shim on first use (throws std::runtime_error if SQLite
// refuses).
void InstallCountingVfs();
WrittenBytes Written();

}  // namespace outbox::bench
