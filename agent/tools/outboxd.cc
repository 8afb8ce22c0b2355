// outboxd: the sidecar daemon (docs/operations.md). Delivers the rows that
// applications in any language insert with plain SQL, serves /metrics and
// /healthz, stops cleanly on SIGTERM/SIGINT and reloads on SIGHUP. The logic
// is the daemon library (agent/daemon/daemon.h); this file parses flags.
//
// Exit status: 0 after a clean stop or a good --check-config, 1 when the
// database or the environment fails, 2 for bad flags or a bad config. Errors
// before the logger exists are one line on stderr; later ones one log line.
#include <spdlog/logger.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <stdexcept>
#include <string>

#include "config_file.h"
#include "daemon.h"
#include "logging.h"

namespace {

// --check-config: warnings and adjusted defaults on stderr, the completion
// hooks prepared against the database when it exists (read-only), then the
// verdict or, with --print, the effective config on stdout.
int CheckConfig(const outbox::daemon::DaemonOptions& options, outbox::agent::Config& config,
                bool print) {
  for (const std::string& warning : config.warnings) {
    std::cerr << "outboxd: warning: " << options.config_path << ": " << warning << '\n';
  }
  // A default moved to fit what the user wrote: say what it is now.
  for (const std::string& adjustment : config.adjustments) {
    std::cerr << "outboxd: note: " << options.config_path << ": " << adjustment << '\n';
  }
  bool any_hook = false;
  for (const auto& [name, topic] : config.options.topics) {
    any_hook = any_hook || !topic.hooks.on_delivered_sql.empty() ||
               !topic.hooks.on_dead_sql.empty();
  }
  bool hooks_checked = false;
  if (any_hook) {
    config.options.db_path = options.db_path;
    try {
      hooks_checked = outbox::agent::CheckHookSql(config.options);
    } catch (const std::invalid_argument& e) {
      // A hook is the config's text: name the file like every config error.
      std::cerr << "outboxd: " << options.config_path << ": " << e.what() << '\n';
      return outbox::daemon::kExitUsage;
    } catch (const std::exception& e) {
      std::cerr << "outboxd: " << e.what() << '\n';
      return outbox::daemon::kExitFailure;
    }
  }
  if (print) {
    std::cout << outbox::agent::EffectiveConfigJson(config);
    return outbox::daemon::kExitOk;
  }
  const std::size_t topics = config.options.topics.size();
  std::cout << options.config_path << ": ok (" << topics << " topic"
            << (topics == 1 ? "" : "s") << ")";
  if (any_hook && !hooks_checked) {
    std::cout << "; hooks not checked: " << options.db_path
              << " does not exist yet (they are checked at start-up)";
  }
  std::cout << "\n";
  return outbox::daemon::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread exists, so that every thread inherits the mask.
  outbox::daemon::BlockDaemonSignals();

  CLI::App app{"Deliver an edge-outbox database's messages over HTTP", "outboxd"};
  app.set_version_flag("--version", "outboxd 0.1.0");
  outbox::daemon::DaemonOptions options;
  bool check_only = false;
  bool print = false;
  app.add_option("--db", options.db_path, "the application's SQLite file")->required();
  app.add_option("--config", options.config_path, "the JSON configuration file")->required();
  app.add_flag("--check-config", check_only,
               "validate the configuration and exit; creates and changes nothing");
  app.add_flag("--print", print,
               "with --check-config: print the effective configuration (defaults filled in, "
               "secrets redacted)")
      ->needs("--check-config");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "outboxd: " << e.what() << '\n';
    return outbox::daemon::kExitUsage;
  }

  outbox::agent::Config config;
  try {
    config = outbox::daemon::LoadConfigFile(options.config_path);
  } catch (const std::invalid_argument& e) {
    std::cerr << "outboxd: " << e.what() << '\n';
    return outbox::daemon::kExitUsage;
  }
  if (check_only) return CheckConfig(options, config, print);

  const auto logger = outbox::daemon::MakeStderrLogger("outboxd");
  outbox::daemon::ApplyLogging(*logger, config);
  for (const std::string& warning : config.warnings) {
    logger->warn("{}: {}", options.config_path, warning);
  }
  for (const std::string& adjustment : config.adjustments) {
    logger->info("{}: {}", options.config_path, adjustment);
  }
  try {
    outbox::daemon::Daemon daemon(options, std::move(config), logger);
    return daemon.Run();
  } catch (const std::exception& e) {
    logger->critical("{}", e.what());
    return outbox::daemon::kExitFailure;
  }
}
