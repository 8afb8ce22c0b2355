#include "counting_vfs.h"

#include <sqlite3.h>

#include <atomic>
#include <cstring>
#include <stdexcept>

namespace outbox::bench {
namespace {

std::atomic<std::int64_t> g_db{0};
std::atomic<std::int64_t> g_wal{0};
sqlite3_vfs* g_real = nullptr;

// Our handle, with the real VFS's handle right behind it.
struct File {
  sqlite3_file base;
  std::atomic<std::int64_t>* counter;  // null: not counted (temp files, -shm)
  sqlite3_file* Real() { return reinterpret_cast<sqlite3_file*>(this + 1); }
};

File* Of(sqlite3_file* f) { return reinterpret_cast<File*>(f); }

int Close(sqlite3_file* f) { return Of(f)->Real()->pMethods->xClose(Of(f)->Real()); }
int Read(sqlite3_file* f, void* b, int n, sqlite3_int64 o) {
  return Of(f)->Real()->pMethods->xRead(Of(f)->Real(), b, n, o);
}
int Write(sqlite3_file* f, const void* b, int n, sqlite3_int64 o) {
  if (Of(f)->counter != nullptr) Of(f)->counter->fetch_add(n);
  return Of(f)->Real()->pMethods->xWrite(Of(f)->Real(), b, n, o);
}
int Truncate(sqlite3_file* f, sqlite3_int64 s) {
  return Of(f)->Real()->pMethods->xTruncate(Of(f)->Real(), s);
}
int Sync(sqlite3_file* f, int flags) { return Of(f)->Real()->pMethods->xSync(Of(f)->Real(), flags); }
int FileSize(sqlite3_file* f, sqlite3_int64* s) {
  return Of(f)->Real()->pMethods->xFileSize(Of(f)->Real(), s);
}
int Lock(sqlite3_file* f, int l) { return Of(f)->Real()->pMethods->xLock(Of(f)->Real(), l); }
int Unlock(sqlite3_file* f, int l) { return Of(f)->Real()->pMethods->xUnlock(Of(f)->Real(), l); }
int CheckLock(sqlite3_file* f, int* r) {
  return Of(f)->Real()->pMethods->xCheckReservedLock(Of(f)->Real(), r);
}
int FileControl(sqlite3_file* f, int op, void* arg) {
  return Of(f)->Real()->pMethods->xFileControl(Of(f)->Real(), op, arg);
}
int SectorSize(sqlite3_file* f) { return Of(f)->Real()->pMethods->xSectorSize(Of(f)->Real()); }
int DeviceCharacteristics(sqlite3_file* f) {
  return Of(f)->Real()->pMethods->xDeviceCharacteristics(Of(f)->Real());
}
int ShmMap(sqlite3_file* f, int i, int size, int extend, void volatile** p) {
  return Of(f)->Real()->pMethods->xShmMap(Of(f)->Real(), i, size, extend, p);
}
int ShmLock(sqlite3_file* f, int offset, int n, int flags) {
  return Of(f)->Real()->pMethods->xShmLock(Of(f)->Real(), offset, n, flags);
}
void ShmBarrier(sqlite3_file* f) { Of(f)->Real()->pMethods->xShmBarrier(Of(f)->Real()); }
int ShmUnmap(sqlite3_file* f, int del) {
  return Of(f)->Real()->pMethods->xShmUnmap(Of(f)->Real(), del);
}
int Fetch(sqlite3_file* f, sqlite3_int64 o, int n, void** p) {
  return Of(f)->Real()->pMethods->xFetch(Of(f)->Real(), o, n, p);
}
int Unfetch(sqlite3_file* f, sqlite3_int64 o, void* p) {
  return Of(f)->Real()->pMethods->xUnfetch(Of(f)->Real(), o, p);
}

const sqlite3_io_methods kMethods = {3,        Close,       Read,        Write,     Truncate,
                                     Sync,     FileSize,    Lock,        Unlock,    CheckLock,
                                     FileControl, SectorSize, DeviceCharacteristics, ShmMap,
                                     ShmLock,  ShmBarrier,  ShmUnmap,    Fetch,     Unfetch};

int Open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* f, int flags, int* out_flags) {
  File* file = Of(f);
  file->base.pMethods = nullptr;
  file->counter = (flags & SQLITE_OPEN_MAIN_DB) != 0 ? &g_db
                  : (flags & SQLITE_OPEN_WAL) != 0   ? &g_wal
                                                     : nullptr;
  const int rc = g_real->xOpen(g_real, name, file->Real(), flags, out_flags);
  if (rc == SQLITE_OK && file->Real()->pMethods != nullptr) file->base.pMethods = &kMethods;
  return rc;
}

int Delete(sqlite3_vfs*, const char* name, int sync) { return g_real->xDelete(g_real, name, sync); }
int Access(sqlite3_vfs*, const char* name, int flags, int* out) {
  return g_real->xAccess(g_real, name, flags, out);
}
int FullPathname(sqlite3_vfs*, const char* name, int n, char* out) {
  return g_real->xFullPathname(g_real, name, n, out);
}
int Randomness(sqlite3_vfs*, int n, char* out) { return g_real->xRandomness(g_real, n, out); }
int Sleep(sqlite3_vfs*, int us) { return g_real->xSleep(g_real, us); }
int CurrentTime(sqlite3_vfs*, double* t) { return g_real->xCurrentTime(g_real, t); }
int GetLastError(sqlite3_vfs*, int n, char* out) { return g_real->xGetLastError(g_real, n, out); }
int CurrentTimeInt64(sqlite3_vfs*, sqlite3_int64* t) {
  return g_real->xCurrentTimeInt64(g_real, t);
}

}  // namespace

void InstallCountingVfs() {
  static sqlite3_vfs vfs;
  if (g_real != nullptr) return;
  g_real = sqlite3_vfs_find(nullptr);
  if (g_real == nullptr) throw std::runtime_error("no default SQLite VFS");
  std::memset(&vfs, 0, sizeof vfs);
  vfs.iVersion = 2;
  vfs.szOsFile = static_cast<int>(sizeof(File)) + g_real->szOsFile;
  vfs.mxPathname = g_real->mxPathname;
  vfs.zName = "counting";
  vfs.xOpen = Open;
  vfs.xDelete = Delete;
  vfs.xAccess = Access;
  vfs.xFullPathname = FullPathname;
  vfs.xDlOpen = [](sqlite3_vfs*, const char* n) { return g_real->xDlOpen(g_real, n); };
  vfs.xDlError = [](sqlite3_vfs*, int n, char* out) { g_real->xDlError(g_real, n, out); };
  vfs.xDlSym = [](sqlite3_vfs*, void* h, const char* s) { return g_real->xDlSym(g_real, h, s); };
  vfs.xDlClose = [](sqlite3_vfs*, void* h) { g_real->xDlClose(g_real, h); };
  vfs.xRandomness = Randomness;
  vfs.xSleep = Sleep;
  vfs.xCurrentTime = CurrentTime;
  vfs.xGetLastError = GetLastError;
  vfs.xCurrentTimeInt64 = CurrentTimeInt64;
  if (sqlite3_vfs_register(&vfs, 1) != SQLITE_OK) {
    throw std::runtime_error("cannot register the counting VFS");
  }
}

WrittenBytes Written() { return {g_db.load(), g_wal.load()}; }

}  // namespace outbox::bench
