// A SQLite VFS that simulates power cuts, in the spirit of the "crash" VFS of
// SQLite's own test suite (src/test6.c).
//
// It wraps the default unix VFS (shared memory included, so WAL mode really
// runs through it) and passes every call on, while it records, per file, the
// writes and truncations made since that file's last xSync, with the bytes
// they replaced. A sync of a file from any handle makes that file's earlier
// writes durable, as fsync does.
//
// At the cut (after a chosen number of writes and syncs, or on demand) every
// later call fails with an I/O error: nothing more reaches the files. Once
// every connection is closed, Reboot() rewrites each file to what a disk
// could hold after losing power: its contents at its last sync, plus each
// unsynced write dropped, kept, or torn into sector-sized pieces of which a
// random subset lands, in random order. The -shm files are deleted, so the
// next open rebuilds the WAL index from the log, with no state or lock carried
// over from before the cut.
//
// Thread-safe: one mutex serialises the recorded calls.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>

namespace outbox::powercut {

// What the operation at the cut was: which file, which call, and the label of
// the thread that made it (see ScopedLabel).
struct CutSite {
  std::string file_kind;  // "db", "wal", "journal", "other", or "" (no I/O: cut on demand)
  std::string call;       // "write", "sync", "truncate", or "" (on demand)
  std::string label;      // the thread's label, "" if it had none
};

// What Reboot() did to the unsynced writes.
struct Survival {
  int files = 0;          // files that had unsynced writes
  int writes_kept = 0;    // writes that landed whole
  int writes_dropped = 0; // writes of which nothing landed
  int writes_torn = 0;    // writes of which some pieces landed
};

class PowerCutVfs {
 public:
  // Registers the shim as the process's default VFS ("powercut") on first
  // use. Throws std::runtime_error if SQLite refuses.
  static PowerCutVfs& Instance();

  // Cut the power when the `ops`-th write, sync or truncation from now is
  // attempted (1 = the next one). A write at the cut is recorded first (it may
  // land partly); a sync at the cut does not happen. 0 disarms.
  void ArmAfter(std::int64_t ops);
  // Cut the power now (from a test's handler, say).
  void CutNow();
  bool IsCut() const;
  // Writes, syncs and truncations since the last Reset() or Reboot().
  std::int64_t Ops() const;
  // Calls of xShmMap since the last Reset(): proof that WAL mode ran here.
  std::int64_t ShmMaps() const;
  CutSite Site() const;

  // Forget the unsynced writes as if everything were synced (after a setup
  // step that must survive). Only with every connection closed.
  void Reset();

  // After the cut, with every connection to the files closed: apply the
  // power cut to the files, delete their -shm files and start over
  // uncut. `sector` is the size of the pieces a write may tear into.
  Survival Reboot(std::mt19937_64& random, int sector = 512);

  // Label the calling thread's I/O for CutSite (e.g. "enqueue").
  class ScopedLabel {
   public:
    explicit ScopedLabel(const char* label);
    ~ScopedLabel();
    ScopedLabel(const ScopedLabel&) = delete;
    ScopedLabel& operator=(const ScopedLabel&) = delete;

   private:
    const char* previous_;
  };

  struct Impl;

 private:
  PowerCutVfs();
  std::unique_ptr<Impl> impl_;
};

}  // namespace outbox::powercut
