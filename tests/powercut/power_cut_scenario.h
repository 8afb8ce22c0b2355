// One cut point: an application enqueues through a real Agent on a fresh
// database file while the power is cut at a chosen moment; then the files
// are rebooted from what survived, checked, and a fresh agent delivers the
// rest. Everything runs on the PowerCutVfs, the process's default VFS.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "outbox/store.h"
#include "power_cut_vfs.h"

namespace outbox::powercut {

struct PointPlan {
  std::uint64_t seed = 0;
  // PRAGMA synchronous of the application's connection.
  store::Synchronous app_synchronous = store::Synchronous::kFull;
  // The file starts at schema version 1 and the agent migrates it.
  bool migrate = false;
  // Cut at this write/sync/truncate from the start of the run (1-based) ...
  std::int64_t cut_at_op = 0;
  // ... or while the receiver takes its cut_at_send-th message (1-based).
  int cut_at_send = 0;
  // Neither: cut once everything acknowledged was delivered.
};

struct PointResult {
  CutSite site;           // where the power went ("idle": after the work)
  Survival survival;
  std::int64_t ops = 0;   // writes, syncs and truncations before the cut
  int acknowledged = 0;   // messages whose COMMIT returned before the cut
  int received_before_cut = 0;
  int resent = 0;         // messages received more than once
  int most_receipts = 0;  // the most times one message was received
  // Violations; all must be 0 (lost only counts with app synchronous=FULL).
  int integrity_errors = 0;
  int lost = 0;           // acknowledged, gone after the reboot
  int phantoms = 0;       // received, but not in the rebooted database
  int rolled_back_sent = 0;
  int stuck = 0;          // not delivered once the fresh agent is done
  std::string failure;    // first violation, readable
};

// Runs the point in `dir` (a fresh, empty directory).
PointResult RunPoint(const PointPlan& plan, const std::string& dir);

// Writes, syncs and truncations of a whole run without a cut (to spread cut
// points over it).
std::int64_t MeasureOps(const PointPlan& plan, const std::string& dir);

// Where a cut happened, for the tally: "<label>/<file>/<call>".
std::string SiteName(const CutSite& site);

}  // namespace outbox::powercut
