// outboxctl: inspect and repair an outbox database. Links only the store, so
// it is safe to run beside a live outboxd (short transactions, busy timeout).
// One file per command group: outboxctl_inspect.cc (init, stats, list, show,
// audit), outboxctl_repair.cc (retry, purge, enqueue, cancel,
// mark-delivered), outboxctl_bulk.cc (bulk actions by filter, and the filter
// flags `list` shares), outboxctl_reconcile.cc, outboxctl_archive.cc
// (archive-restore), outboxctl_top.cc.
//
// Exit status: 0 success, 1 the database or the environment failed (also: a
// row is in flight), 2 bad flags or bad input, 3 reconcile found
// differences. Errors are one line on stderr.
#include <CLI/CLI.hpp>
#include <iostream>

#include "outboxctl_common.h"

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
  DeclareBulkCommand(app, context, commands);

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
