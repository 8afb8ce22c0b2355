// outboxctl: inspect and repair an outbox database. Links only the store, so
// it is safe to run beside a live outboxd (short transactions, busy timeout).
// One file per command group: outboxctl_inspect.cc (init, stats, list, show,
// audit), outboxctl_repair.cc (retry, purge, enqueue, cancel,
// mark-delivered), outboxctl_reconcile.cc, outboxctl_archive.cc
// (archive-restore), outboxctl_top.cc.
//
// Exit status: 0 success, 1 the database or the environment failed (also: a
// row is in flight), 2 bad flags or bad input, 3 reconcile found
// differences. Errors are one line on stderr.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <string_view>

#include "outboxctl_common.h"

namespace {

// The first word that is not a global option, or empty. CLI11 reports an
// unknown command as "A subcommand is required"; this lets outboxctl name it.
std::string_view CommandWord(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--db") {
      ++i;
    } else if (!arg.starts_with("-")) {
      return arg;
    }
  }
  return {};
}

// Exits 2 naming the unknown command and the known ones; 0 if `word` is one.
int CheckCommandWord(const CLI::App& app, std::string_view word) {
  if (word.empty()) return 0;
  std::string known;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == word) return 0;
    known += (known.empty() ? "" : ", ") + sub->get_name();
  }
  std::cerr << "outboxctl: unknown command '" << word << "' (commands: " << known
            << "; outboxctl --help says more)\n";
  return outbox::ctl::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace outbox::ctl;
  CLI::App app{"Inspect and repair an edge-outbox database", "outboxctl"};
  app.set_version_flag("--version", "outboxctl 0.1.0");
  Context context;
  app.add_option("--db", context.db_path, "the application's SQLite file")->required();
  app.require_subcommand(1);
  Commands commands;
  DeclareInspectCommands(app, context, commands);
  DeclareRepairCommands(app, context, commands);
  DeclareReconcileCommands(app, context, commands);
  DeclareArchiveCommands(app, context, commands);
  DeclareTopCommands(app, context, commands);

  if (int status = CheckCommandWord(app, CommandWord(argc, argv)); status != 0) return status;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "outboxctl: " << e.what() << '\n';
    return kExitUsage;
  }

  try {
    for (const Command& command : commands) {
      if (command.subcommand->parsed()) return command.run();
    }
    return kExitUsage;
  } catch (const std::invalid_argument& e) {
    std::cerr << "outboxctl: " << e.what() << '\n';
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "outboxctl: " << e.what() << '\n';
    return kExitFailure;
  }
}
