#include "wal_pages.h"

#include <cstdint>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>
#include <vector>

namespace outbox::bench {
namespace {

std::uint32_t BigEndian32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

// One commit's page numbers, in log order, for every commit in the file.
// Frames are 24 bytes of header (page number, then the database size in
// pages on a commit's last frame, else 0) and the page (walformat.html).
std::vector<std::vector<std::uint32_t>> Commits(const std::string& wal_path) {
  std::ifstream in(wal_path, std::ios::binary);
  const std::vector<unsigned char> wal((std::istreambuf_iterator<char>(in)),
                                       std::istreambuf_iterator<char>());
  if (wal.size() < 32) throw std::runtime_error(wal_path + ": not a write-ahead log");
  const std::uint32_t page_size = BigEndian32(&wal[8]);
  std::vector<std::vector<std::uint32_t>> commits(1);
  for (std::size_t at = 32; at + 24 + page_size <= wal.size(); at += 24 + page_size) {
    commits.back().push_back(BigEndian32(&wal[at]));
    if (BigEndian32(&wal[at + 4]) != 0) commits.emplace_back();
  }
  commits.pop_back();  // frames of no commit (none, or a transaction in progress)
  return commits;
}

}  // namespace

PageOwners OwnersNow(SQLite::Database& db) {
  std::map<std::uint32_t, std::string> owners;
  SQLite::Statement q(db, "SELECT pageno, name, pagetype FROM dbstat");
  while (q.executeStep()) {
    const auto page = static_cast<std::uint32_t>(q.getColumn(0).getInt64());
    owners[page] = page == 1 ? "page 1 (header, sqlite_schema)"
                             : q.getColumn(1).getString() + " " + q.getColumn(2).getString();
  }
  return owners;
}

namespace {

// Pointer-map pages of an auto-vacuum file: page 2, then every
// usable/5 + 1 pages (btree.c, PTRMAP_PAGENO).
bool IsPointerMap(std::uint32_t page, std::uint32_t usable) {
  const std::uint32_t span = usable / 5 + 1;
  return page >= 2 && (page - 2) % span == 0;
}

}  // namespace

std::vector<std::map<std::string, int>> PagesOfEachCommit(SQLite::Database& db,
                                                          const std::string& wal_path,
                                                          const PageOwners* snapshot) {
  const PageOwners owners = snapshot != nullptr ? *snapshot : OwnersNow(db);
  SQLite::Statement info(db, "SELECT page_size, (SELECT auto_vacuum FROM pragma_auto_vacuum)"
                             " FROM pragma_page_size");
  info.executeStep();
  const auto usable = static_cast<std::uint32_t>(info.getColumn(0).getInt64());
  const bool auto_vacuum = info.getColumn(1).getInt() != 0;
  std::vector<std::map<std::string, int>> pages;
  for (const std::vector<std::uint32_t>& commit : Commits(wal_path)) {
    std::map<std::string, int>& named = pages.emplace_back();
    for (const std::uint32_t page : commit) {
      const auto owner = owners.find(page);
      const std::string what = owner != owners.end()                   ? owner->second
                               : auto_vacuum && IsPointerMap(page, usable) ? "pointer map"
                                                                          : "free list";
      ++named[what];
    }
  }
  return pages;
}

std::map<std::string, double> PagesPerCommit(SQLite::Database& db, const std::string& wal_path,
                                             int commits) {
  const std::vector<std::map<std::string, int>> all = PagesOfEachCommit(db, wal_path);
  if (static_cast<int>(all.size()) < commits) {
    throw std::runtime_error(wal_path + ": fewer commits than asked for");
  }
  std::map<std::string, double> pages;
  for (std::size_t c = all.size() - static_cast<std::size_t>(commits); c < all.size(); ++c) {
    for (const auto& [what, count] : all[c]) pages[what] += static_cast<double>(count) / commits;
  }
  return pages;
}

int DistinctPages(const std::string& wal_path) {
  std::set<std::uint32_t> pages;
  for (const std::vector<std::uint32_t>& commit : Commits(wal_path)) {
    pages.insert(commit.begin(), commit.end());
  }
  return static_cast<int>(pages.size());
}

}  // namespace outbox::bench
