#include "power_cut_vfs.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <vector>

namespace outbox::powercut {
namespace {

thread_local const char* g_label = nullptr;

// One write or truncation not yet covered by a sync, with what it replaced,
// so that the file's state at its last sync can be rebuilt.
struct PendingOp {
  bool truncate = false;
  std::int64_t offset = 0;        // write: where; truncate: the new size
  std::vector<char> data;         // write: the bytes written
  std::int64_t old_size = 0;      // file size before the op
  std::vector<char> old_bytes;    // bytes the op replaced (within old_size)
};

struct FileState {
  std::string kind;  // "db", "wal", "journal", "other"
  std::vector<PendingOp> pending;
};

struct ShimFile {
  sqlite3_file base;
  PowerCutVfs::Impl* impl;
  FileState* state;  // null for files without a name (temporary)
  sqlite3_file* real;
};

constexpr std::size_t kRealOffset = (sizeof(ShimFile) + 15) & ~std::size_t{15};

ShimFile* Shim(sqlite3_file* file) { return reinterpret_cast<ShimFile*>(file); }
sqlite3_file* Real(sqlite3_file* file) { return Shim(file)->real; }

std::vector<char> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteWhole(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error(path + ": cannot write the file after the power cut");
}

void Put(std::vector<char>& file, std::int64_t offset, const char* bytes, std::size_t n) {
  const auto at = static_cast<std::size_t>(offset);
  if (file.size() < at + n) file.resize(at + n, 0);
  std::memcpy(file.data() + at, bytes, n);
}

}  // namespace

struct PowerCutVfs::Impl {
  sqlite3_vfs vfs{};
  sqlite3_vfs* unix_vfs = nullptr;
  sqlite3_io_methods methods{};

  mutable std::mutex mutex;
  std::map<std::string, FileState> files;  // by path; guarded by mutex
  std::int64_t ops = 0;                    // guarded by mutex
  std::int64_t armed_at = 0;               // guarded by mutex
  std::int64_t shm_maps = 0;               // guarded by mutex
  bool cut = false;                        // guarded by mutex
  CutSite site;                            // guarded by mutex

  // Counts one write, sync or truncation; true if the power goes at it.
  bool CountOp(const FileState* state, const char* call) {
    ++ops;
    if (armed_at == 0 || ops != armed_at) return false;
    cut = true;
    site = {state ? state->kind : "other", call, g_label ? g_label : ""};
    return true;
  }

  // --- io methods ------------------------------------------------------------

  static int Close(sqlite3_file* file) {
    sqlite3_file* real = Real(file);
    return real->pMethods ? real->pMethods->xClose(real) : SQLITE_OK;
  }

  static int Read(sqlite3_file* file, void* buffer, int n, sqlite3_int64 offset) {
    Impl* impl = Shim(file)->impl;
    {
      std::lock_guard lock(impl->mutex);
      if (impl->cut) return SQLITE_IOERR_READ;
    }
    return Real(file)->pMethods->xRead(Real(file), buffer, n, offset);
  }

  static int Write(sqlite3_file* file, const void* buffer, int n, sqlite3_int64 offset) {
    ShimFile* shim = Shim(file);
    Impl* impl = shim->impl;
    sqlite3_file* real = shim->real;
    std::lock_guard lock(impl->mutex);
    if (impl->cut) return SQLITE_IOERR_WRITE;
    const bool cut_here = impl->CountOp(shim->state, "write");
    PendingOp op;
    if (shim->state) {
      sqlite3_int64 size = 0;
      if (real->pMethods->xFileSize(real, &size) != SQLITE_OK) return SQLITE_IOERR_FSTAT;
      op.offset = offset;
      op.old_size = size;
      const sqlite3_int64 old_end = std::min<sqlite3_int64>(offset + n, size);
      if (old_end > offset) {
        op.old_bytes.resize(static_cast<std::size_t>(old_end - offset));
        const int rc = real->pMethods->xRead(real, op.old_bytes.data(),
                                             static_cast<int>(op.old_bytes.size()), offset);
        if (rc != SQLITE_OK) return rc;
      }
      const char* bytes = static_cast<const char*>(buffer);
      op.data.assign(bytes, bytes + n);
    }
    const int rc = real->pMethods->xWrite(real, buffer, n, offset);
    if (rc == SQLITE_OK && shim->state) shim->state->pending.push_back(std::move(op));
    return cut_here ? SQLITE_IOERR_WRITE : rc;
  }

  static int Truncate(sqlite3_file* file, sqlite3_int64 size) {
    ShimFile* shim = Shim(file);
    Impl* impl = shim->impl;
    sqlite3_file* real = shim->real;
    std::lock_guard lock(impl->mutex);
    if (impl->cut) return SQLITE_IOERR_TRUNCATE;
    if (impl->CountOp(shim->state, "truncate")) return SQLITE_IOERR_TRUNCATE;
    PendingOp op;
    op.truncate = true;
    op.offset = size;
    if (shim->state) {
      sqlite3_int64 old_size = 0;
      if (real->pMethods->xFileSize(real, &old_size) != SQLITE_OK) return SQLITE_IOERR_FSTAT;
      op.old_size = old_size;
      if (old_size > size) {
        op.old_bytes.resize(static_cast<std::size_t>(old_size - size));
        const int rc = real->pMethods->xRead(real, op.old_bytes.data(),
                                             static_cast<int>(op.old_bytes.size()), size);
        if (rc != SQLITE_OK) return rc;
      }
    }
    const int rc = real->pMethods->xTruncate(real, size);
    if (rc == SQLITE_OK && shim->state) shim->state->pending.push_back(std::move(op));
    return rc;
  }

  static int Sync(sqlite3_file* file, int flags) {
    ShimFile* shim = Shim(file);
    Impl* impl = shim->impl;
    std::lock_guard lock(impl->mutex);
    if (impl->cut) return SQLITE_IOERR_FSYNC;
    if (impl->CountOp(shim->state, "sync")) return SQLITE_IOERR_FSYNC;
    // The shim is the disk model: a sync makes the file's writes from every
    // handle durable, as fsync does. The real fsync would only cost time.
    if (shim->state == nullptr) return shim->real->pMethods->xSync(shim->real, flags);
    shim->state->pending.clear();
    return SQLITE_OK;
  }

  static int FileSize(sqlite3_file* file, sqlite3_int64* size) {
    return Real(file)->pMethods->xFileSize(Real(file), size);
  }

  static int Lock(sqlite3_file* file, int level) {
    Impl* impl = Shim(file)->impl;
    {
      std::lock_guard lock(impl->mutex);
      if (impl->cut) return SQLITE_IOERR_LOCK;
    }
    return Real(file)->pMethods->xLock(Real(file), level);
  }

  static int Unlock(sqlite3_file* file, int level) {
    return Real(file)->pMethods->xUnlock(Real(file), level);
  }

  static int CheckReservedLock(sqlite3_file* file, int* out) {
    return Real(file)->pMethods->xCheckReservedLock(Real(file), out);
  }

  static int FileControl(sqlite3_file* file, int op, void* arg) {
    // A size hint may extend the file with writes this shim would not see.
    if (op == SQLITE_FCNTL_SIZE_HINT) return SQLITE_NOTFOUND;
    return Real(file)->pMethods->xFileControl(Real(file), op, arg);
  }

  static int SectorSize(sqlite3_file* file) {
    return Real(file)->pMethods->xSectorSize(Real(file));
  }

  static int DeviceCharacteristics(sqlite3_file* file) {
    return Real(file)->pMethods->xDeviceCharacteristics(Real(file));
  }

  static int ShmMap(sqlite3_file* file, int region, int size, int extend, void volatile** out) {
    Impl* impl = Shim(file)->impl;
    {
      std::lock_guard lock(impl->mutex);
      if (impl->cut) return SQLITE_IOERR_SHMMAP;
      ++impl->shm_maps;
    }
    return Real(file)->pMethods->xShmMap(Real(file), region, size, extend, out);
  }

  static int ShmLock(sqlite3_file* file, int offset, int n, int flags) {
    Impl* impl = Shim(file)->impl;
    if ((flags & SQLITE_SHM_LOCK) != 0) {
      std::lock_guard lock(impl->mutex);
      if (impl->cut) return SQLITE_IOERR_SHMLOCK;
    }
    return Real(file)->pMethods->xShmLock(Real(file), offset, n, flags);
  }

  static void ShmBarrier(sqlite3_file* file) { Real(file)->pMethods->xShmBarrier(Real(file)); }

  static int ShmUnmap(sqlite3_file* file, int delete_flag) {
    return Real(file)->pMethods->xShmUnmap(Real(file), delete_flag);
  }

  // No memory-mapped reads: every read goes through Read().
  static int Fetch(sqlite3_file*, sqlite3_int64, int, void** out) {
    *out = nullptr;
    return SQLITE_OK;
  }
  static int Unfetch(sqlite3_file*, sqlite3_int64, void*) { return SQLITE_OK; }

  // --- vfs methods -----------------------------------------------------------

  static Impl* Of(sqlite3_vfs* vfs) { return static_cast<Impl*>(vfs->pAppData); }

  static int Open(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags,
                  int* out_flags) {
    Impl* impl = Of(vfs);
    ShimFile* shim = Shim(file);
    shim->base.pMethods = nullptr;
    shim->impl = impl;
    shim->state = nullptr;
    shim->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + kRealOffset);
    {
      std::lock_guard lock(impl->mutex);
      if (impl->cut) return SQLITE_CANTOPEN;
      if (name != nullptr) {
        FileState& state = impl->files[name];
        if (flags & SQLITE_OPEN_MAIN_DB) {
          state.kind = "db";
        } else if (flags & SQLITE_OPEN_WAL) {
          state.kind = "wal";
        } else if (flags & SQLITE_OPEN_MAIN_JOURNAL) {
          state.kind = "journal";
        } else if (state.kind.empty()) {
          state.kind = "other";
        }
        shim->state = &state;
      }
    }
    const int rc = impl->unix_vfs->xOpen(impl->unix_vfs, name, shim->real, flags, out_flags);
    if (shim->real->pMethods != nullptr) shim->base.pMethods = &impl->methods;
    return rc;
  }

  static int Delete(sqlite3_vfs* vfs, const char* name, int sync_dir) {
    Impl* impl = Of(vfs);
    {
      std::lock_guard lock(impl->mutex);
      if (impl->cut) return SQLITE_IOERR_DELETE;
      auto it = impl->files.find(name);
      if (it != impl->files.end()) it->second.pending.clear();
    }
    return impl->unix_vfs->xDelete(impl->unix_vfs, name, sync_dir);
  }

  static int Access(sqlite3_vfs* vfs, const char* name, int flags, int* out) {
    Impl* impl = Of(vfs);
    {
      std::lock_guard lock(impl->mutex);
      if (impl->cut) return SQLITE_IOERR_ACCESS;
    }
    return impl->unix_vfs->xAccess(impl->unix_vfs, name, flags, out);
  }

  static int FullPathname(sqlite3_vfs* vfs, const char* name, int n, char* out) {
    return Of(vfs)->unix_vfs->xFullPathname(Of(vfs)->unix_vfs, name, n, out);
  }
  static void* DlOpen(sqlite3_vfs* vfs, const char* name) {
    return Of(vfs)->unix_vfs->xDlOpen(Of(vfs)->unix_vfs, name);
  }
  static void DlError(sqlite3_vfs* vfs, int n, char* out) {
    Of(vfs)->unix_vfs->xDlError(Of(vfs)->unix_vfs, n, out);
  }
  static void (*DlSym(sqlite3_vfs* vfs, void* handle, const char* symbol))(void) {
    return Of(vfs)->unix_vfs->xDlSym(Of(vfs)->unix_vfs, handle, symbol);
  }
  static void DlClose(sqlite3_vfs* vfs, void* handle) {
    Of(vfs)->unix_vfs->xDlClose(Of(vfs)->unix_vfs, handle);
  }
  static int Randomness(sqlite3_vfs* vfs, int n, char* out) {
    return Of(vfs)->unix_vfs->xRandomness(Of(vfs)->unix_vfs, n, out);
  }
  static int Sleep(sqlite3_vfs* vfs, int micros) {
    return Of(vfs)->unix_vfs->xSleep(Of(vfs)->unix_vfs, micros);
  }
  static int CurrentTime(sqlite3_vfs* vfs, double* out) {
    return Of(vfs)->unix_vfs->xCurrentTime(Of(vfs)->unix_vfs, out);
  }
  static int GetLastError(sqlite3_vfs* vfs, int n, char* out) {
    return Of(vfs)->unix_vfs->xGetLastError(Of(vfs)->unix_vfs, n, out);
  }
  static int CurrentTimeInt64(sqlite3_vfs* vfs, sqlite3_int64* out) {
    return Of(vfs)->unix_vfs->xCurrentTimeInt64(Of(vfs)->unix_vfs, out);
  }
};

PowerCutVfs& PowerCutVfs::Instance() {
  // Never destroyed: SQLite may hold the VFS until the process ends.
  static PowerCutVfs* const instance = new PowerCutVfs();
  return *instance;
}

PowerCutVfs::PowerCutVfs() : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.unix_vfs = sqlite3_vfs_find("unix");
  if (d.unix_vfs == nullptr) throw std::runtime_error("powercut: no unix VFS in this SQLite");
  d.methods.iVersion = 3;
  d.methods.xClose = Impl::Close;
  d.methods.xRead = Impl::Read;
  d.methods.xWrite = Impl::Write;
  d.methods.xTruncate = Impl::Truncate;
  d.methods.xSync = Impl::Sync;
  d.methods.xFileSize = Impl::FileSize;
  d.methods.xLock = Impl::Lock;
  d.methods.xUnlock = Impl::Unlock;
  d.methods.xCheckReservedLock = Impl::CheckReservedLock;
  d.methods.xFileControl = Impl::FileControl;
  d.methods.xSectorSize = Impl::SectorSize;
  d.methods.xDeviceCharacteristics = Impl::DeviceCharacteristics;
  d.methods.xShmMap = Impl::ShmMap;
  d.methods.xShmLock = Impl::ShmLock;
  d.methods.xShmBarrier = Impl::ShmBarrier;
  d.methods.xShmUnmap = Impl::ShmUnmap;
  d.methods.xFetch = Impl::Fetch;
  d.methods.xUnfetch = Impl::Unfetch;

  d.vfs.iVersion = 2;
  d.vfs.szOsFile = static_cast<int>(kRealOffset) + d.unix_vfs->szOsFile;
  d.vfs.mxPathname = d.unix_vfs->mxPathname;
  d.vfs.zName = "powercut";
  d.vfs.pAppData = &d;
  d.vfs.xOpen = Impl::Open;
  d.vfs.xDelete = Impl::Delete;
  d.vfs.xAccess = Impl::Access;
  d.vfs.xFullPathname = Impl::FullPathname;
  d.vfs.xDlOpen = Impl::DlOpen;
  d.vfs.xDlError = Impl::DlError;
  d.vfs.xDlSym = Impl::DlSym;
  d.vfs.xDlClose = Impl::DlClose;
  d.vfs.xRandomness = Impl::Randomness;
  d.vfs.xSleep = Impl::Sleep;
  d.vfs.xCurrentTime = Impl::CurrentTime;
  d.vfs.xGetLastError = Impl::GetLastError;
  d.vfs.xCurrentTimeInt64 = Impl::CurrentTimeInt64;
  // The default VFS: the store and the agent open their files by path.
  if (sqlite3_vfs_register(&d.vfs, 1) != SQLITE_OK) {
    throw std::runtime_error("powercut: sqlite3_vfs_register failed");
  }
}

void PowerCutVfs::ArmAfter(std::int64_t ops) {
  std::lock_guard lock(impl_->mutex);
  impl_->armed_at = ops == 0 ? 0 : impl_->ops + ops;
}

void PowerCutVfs::CutNow() {
  std::lock_guard lock(impl_->mutex);
  if (impl_->cut) return;
  impl_->cut = true;
  impl_->site = {"", "", g_label ? g_label : ""};
}

bool PowerCutVfs::IsCut() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->cut;
}

std::int64_t PowerCutVfs::Ops() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->ops;
}

std::int64_t PowerCutVfs::ShmMaps() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->shm_maps;
}

CutSite PowerCutVfs::Site() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->site;
}

void PowerCutVfs::Reset() {
  std::lock_guard lock(impl_->mutex);
  impl_->files.clear();
  impl_->ops = 0;
  impl_->armed_at = 0;
  impl_->shm_maps = 0;
  impl_->cut = false;
  impl_->site = {};
}

Survival PowerCutVfs::Reboot(std::mt19937_64& random, int sector) {
  std::lock_guard lock(impl_->mutex);
  Survival survival;
  for (auto& [path, state] : impl_->files) {
    if (state.kind == "db") std::filesystem::remove(path + "-shm");
    if (state.pending.empty() || !std::filesystem::exists(path)) continue;
    ++survival.files;
    // The file as of its last sync: undo the unsynced ops, newest first.
    std::vector<char> file = ReadWhole(path);
    for (auto op = state.pending.rbegin(); op != state.pending.rend(); ++op) {
      if (op->truncate) {
        file.resize(static_cast<std::size_t>(op->old_size), 0);
        if (!op->old_bytes.empty()) {
          Put(file, op->offset, op->old_bytes.data(), op->old_bytes.size());
        }
      } else {
        if (!op->old_bytes.empty()) {
          Put(file, op->offset, op->old_bytes.data(), op->old_bytes.size());
        }
        file.resize(static_cast<std::size_t>(op->old_size), 0);
      }
    }
    // Each unsynced op as pieces: a write cut at sector boundaries, a
    // truncation whole.
    struct Piece {
      std::size_t op;
      std::int64_t offset;
      std::size_t from;  // into op.data
      std::size_t length;
    };
    std::vector<Piece> pieces;
    for (std::size_t i = 0; i < state.pending.size(); ++i) {
      const PendingOp& op = state.pending[i];
      if (op.truncate) {
        pieces.push_back({i, op.offset, 0, 0});
        continue;
      }
      std::size_t from = 0;
      while (from < op.data.size()) {
        const std::int64_t at = op.offset + static_cast<std::int64_t>(from);
        const std::int64_t boundary = (at / sector + 1) * sector;
        const std::size_t length =
            std::min(op.data.size() - from, static_cast<std::size_t>(boundary - at));
        pieces.push_back({i, at, from, length});
        from += length;
      }
    }
    // Per file: everything lost, everything landed in order, or a random
    // subset of the pieces landed in a random order (torn writes).
    const int fate = static_cast<int>(random() % 3);
    std::vector<int> landed(state.pending.size(), 0);
    std::vector<int> total(state.pending.size(), 0);
    for (const Piece& piece : pieces) ++total[piece.op];
    std::vector<Piece> apply;
    if (fate == 1) {
      apply = pieces;
    } else if (fate == 2) {
      for (const Piece& piece : pieces) {
        if (random() % 2 == 0) apply.push_back(piece);
      }
      std::shuffle(apply.begin(), apply.end(), random);
    }
    for (const Piece& piece : apply) {
      const PendingOp& op = state.pending[piece.op];
      ++landed[piece.op];
      if (op.truncate) {
        file.resize(static_cast<std::size_t>(op.offset), 0);
      } else {
        Put(file, piece.offset, op.data.data() + piece.from, piece.length);
      }
    }
    for (std::size_t i = 0; i < state.pending.size(); ++i) {
      if (landed[i] == 0) {
        ++survival.writes_dropped;
      } else if (landed[i] == total[i]) {
        ++survival.writes_kept;
      } else {
        ++survival.writes_torn;
      }
    }
    WriteWhole(path, file);
  }
  impl_->files.clear();
  impl_->ops = 0;
  impl_->armed_at = 0;
  impl_->cut = false;
  impl_->site = {};
  return survival;
}

PowerCutVfs::ScopedLabel::ScopedLabel(const char* label) : previous_(g_label) { g_label = label; }
PowerCutVfs::ScopedLabel::~ScopedLabel() { g_label = previous_; }

}  // namespace outbox::powercut
