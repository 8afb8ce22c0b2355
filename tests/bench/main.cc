// outbox_bench: the hot paths against their physical limits (issue #9).
//
//   outbox_bench FIGURE... [--reps N] [--scale X] [--dir DIR]
//                [--outboxd PATH] [--relay PATH] [--only TEXT] [--payload BYTES]
//
// FIGURE is enqueue (1), store (2), delivery (3), latency (4a), scale (5),
// sidecar (4b and 6), commit-latency (4c), ordering (8), smalldevice (11) or all. Prints
// details on stderr and one "@row" line per result on stdout; packaging/bench.sh turns those
// into the table. Not a ctest test.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "bench_util.h"

int main(int argc, char** argv) {
  using namespace outbox::bench;
  Settings settings;
  std::vector<std::string> figures;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "outbox_bench: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--reps") {
      settings.reps = std::atoi(value().c_str());
    } else if (arg == "--scale") {
      settings.scale = std::atof(value().c_str());
    } else if (arg == "--dir") {
      settings.dir = value();
    } else if (arg == "--outboxd") {
      settings.outboxd = value();
    } else if (arg == "--only") {
      settings.only = value();
    } else if (arg == "--payload") {
      settings.payload = static_cast<std::size_t>(std::atoll(value().c_str()));
    } else if (arg == "--relay") {
      settings.relay = value();
    } else {
      figures.push_back(arg);
    }
  }
  const std::map<std::string, void (*)(const Settings&)> runs = {
      {"enqueue", RunEnqueue}, {"store", RunStore},   {"delivery", RunDelivery},
      {"latency", RunLatency}, {"scale", RunScale},   {"sidecar", RunSidecar},
      {"commit-latency", RunCommitLatency}, {"ordering", RunOrdering},
      {"smalldevice", RunSmallDevice}};
  if (figures.empty() || settings.reps < 1 || settings.scale <= 0 || settings.payload < 64) {
    std::fprintf(stderr,
                 "usage: outbox_bench enqueue|store|delivery|latency|scale|sidecar|commit-latency|"
                 "ordering|smalldevice|all... "
                 "[--reps N] [--scale X] [--dir DIR] [--outboxd PATH] [--relay PATH] "
                 "[--only TEXT] [--payload BYTES]\n");
    return 2;
  }
  if (figures.size() == 1 && figures[0] == "all") {
    figures = {"enqueue", "store",          "delivery", "latency",    "scale",
               "sidecar", "commit-latency", "ordering", "smalldevice"};
  }
  int status = 0;
  for (const std::string& figure : figures) {
    const auto run = runs.find(figure);
    if (run == runs.end()) {
      std::fprintf(stderr, "outbox_bench: unknown figure %s\n", figure.c_str());
      return 2;
    }
    try {
      run->second(settings);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "outbox_bench: %s: %s\n", figure.c_str(), e.what());
      Row(figure, std::string("failed: ") + e.what(), "-", "-", "-", false);
      status = 1;
    }
  }
  return status;
}
