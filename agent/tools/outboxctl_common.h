// What outboxctl's command groups share: the database to open, who acts,
// how times are read and how a command is declared. Internal to outboxctl.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "outbox/store.h"

namespace outbox::ctl {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
// reconcile: the two sides disagree.
inline constexpr int kExitDifferences = 3;

struct Context {
  std::string db_path;
};

// A subcommand and what runs it once the command line is parsed.
struct Command {
  CLI::App* subcommand = nullptr;
  std::function<int()> run;
};
using Commands = std::vector<Command>;

// Each command group declares its subcommands on `app`; their options live
// as long as the returned commands.
void DeclareInspectCommands(CLI::App& app, const Context& context, Commands& commands);
void DeclareRepairCommands(CLI::App& app, const Context& context, Commands& commands);
void DeclareReconcileCommands(CLI::App& app, const Context& context, Commands& commands);
void DeclareArchiveCommands(CLI::App& app, const Context& context, Commands& commands);
void DeclareTopCommands(CLI::App& app, const Context& context, Commands& commands);

// How a command opens the database: the inspecting commands (stats, list,
// show, audit, top) read only, so an operator who may read the file but not
// write it can use them, and they never migrate it.
enum class OpenMode { kReadWrite, kCreate, kReadOnly };
store::Store Open(const Context& context, OpenMode mode = OpenMode::kReadWrite);

// The login name (SUDO_USER before USER, else the uid) and the host name.
store::Actor CurrentActor();

// Seconds from `then_ms` to `now_ms`, in doubles: created_at may hold any
// value another application wrote, and now - INT64_MIN overflows.
double AgeSeconds(std::int64_t now_ms, std::int64_t then_ms);

// Payloads and errors may hold anything; keep table cells on one line.
std::string OneLine(std::string_view text, std::size_t max);

// --status for operator actions: pending or dead only.
store::Status ParseActionStatus(const std::string& name, std::string_view field);

// util::ParseTimeArg / util::ParseDuration with the flag named in the
// error: "--since: 'yesterday': expected ...". Throw std::invalid_argument.
std::int64_t TimeFlag(std::string_view flag, std::string_view text, std::int64_t now_ms);
std::int64_t DurationFlag(std::string_view flag, std::string_view text);

// "N row(s)".
std::string Rows(std::int64_t n);

// Progress of a long operation on stderr, only when stderr is a terminal:
// one line rewritten in place at most a few times a second, cleared at the
// end. Silent otherwise (cron, pipes, tests).
class Progress {
 public:
  explicit Progress(std::string what);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  void Update(std::int64_t done, std::optional<std::int64_t> total = std::nullopt);

 private:
  std::string what_;
  bool enabled_;
  std::int64_t last_shown_ms_ = 0;
  bool shown_ = false;
};

}  // namespace outbox::ctl
