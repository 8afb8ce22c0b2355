// Which b-tree each page of a write-ahead log belongs to: for the bytes
// bench's page listing (bytes_bench --pages), the frames of the last commits
// in a -wal file, named by SQLite's dbstat table (table or index, and whether
// the page is a leaf, an interior or an overflow page) or as the file header
// (page 1), a pointer-map or a free-list page.
#pragma once

#include <SQLiteCpp/Database.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace outbox::bench {

// Frames per commit by what the page is, averaged over the last `commits`
// commits of `wal_path` (the -wal of `db`, not yet checkpointed). Throws
// std::runtime_error if the file is not a WAL or holds fewer commits.
std::map<std::string, double> PagesPerCommit(SQLite::Database& db, const std::string& wal_path,
                                             int commits);

// What each page of `db` is now, by dbstat (committed pages, the log's too).
using PageOwners = std::map<std::uint32_t, std::string>;
PageOwners OwnersNow(SQLite::Database& db);

// Every commit of `wal_path`, in log order: its frames by what the page is,
// as `owners` names them (by default what the pages are now; a snapshot
// taken before the commits names the pages they freed).
std::vector<std::map<std::string, int>> PagesOfEachCommit(SQLite::Database& db,
                                                          const std::string& wal_path,
                                                          const PageOwners* owners = nullptr);

// The distinct pages in `wal_path`'s commits: the pages its checkpoint writes
// to the database file.
int DistinctPages(const std::string& wal_path);

}  // namespace outbox::bench
