// What a smaller page costs beside the bytes it saves (figure 7d of the bytes
// bench, bytes_bench --page-cost): the same outbox files at page_size 1024
// and 4096 in one run, compared by b-tree depth, overflow pages per message
// and the time to claim every row and to read every payload back.
#pragma once

#include <filesystem>
#include <string>

namespace outbox::bench {

// An empty file in WAL mode with the given page size and incremental
// vacuum, as the store makes one (it keeps both: the file is not new).
void MakeFile(const std::string& path, int page_size);

struct PageCostRun {
  int messages = 1000;  // rows per file; 256 B payloads also at 100 times it
  int reps = 5;         // timed passes per page size, alternating; medians
  std::filesystem::path dir;
};

// Prints figure 7d's @row lines (1024 against 4096; no target, ratios only).
void PageCost(const PageCostRun& run);

}  // namespace outbox::bench
