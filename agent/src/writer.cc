// Group commit: one write transaction for everything queued meanwhile.
#include "writer.h"

#include <spdlog/logger.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <vector>

#include "completion.h"
#include "util/thread_name.h"

namespace outbox::agent {
Writer::Writer(const store::Options& options, std::shared_ptr<spdlog::logger> logger)
    : store_(std::make_unique<store::Store>(options)),
      database_id_(store_->database_id()),
      logger_(std::move(logger)) {
  thread_ = std::jthread([this](std::stop_token stop) { Loop(std::move(stop)); });
}

Writer::~Writer() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

void Writer::Submit(Task task) {
  bool wake = true;
  {
    std::lock_guard lock(mutex_);
    // A deferrable change wakes the writer only to open the window (first in
    // the queue) or to close it (the queue is full enough); the ones between
    // would only wake it to go back to sleep.
    if (task.deferrable) {
      wake = queue_.empty() || queue_.size() + 1 >= kGroupMax;
    } else {
      ++urgent_queued_;
    }
    queue_.push_back({std::move(task), nullptr, false});
  }
  if (wake) wake_.notify_one();
}

void Writer::Run(std::function<void(store::Store&)> apply) { Wait(std::move(apply), false); }

void Writer::RunAlone(std::function<void(store::Store&)> apply) {
  Wait(std::move(apply), true);
}

void Writer::Wait(std::function<void(store::Store&)> apply, bool alone) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> result = done->get_future();
  {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable() || thread_.get_stop_token().stop_requested()) {
      throw std::runtime_error("writer: stopped");
    }
    queue_.push_back({Task{std::move(apply), nullptr}, done, alone});
    ++urgent_queued_;
  }
  wake_.notify_one();
  result.get();
}

std::size_t Writer::queued() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

std::int64_t Writer::transactions() const {
  std::lock_guard lock(mutex_);
  return transactions_;
}

void Writer::Loop(std::stop_token stop) {
  util::NameThisThread("outbox-writer");
  for (;;) {
    std::deque<Item> batch;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, stop, [this] { return !queue_.empty(); });
      // Once stopped, drain what is queued (reverts of a stopping agent)
      // and leave.
      if (queue_.empty()) return;
      // Only completions queued: let more arrive. With 8 workers the writer
      // otherwise committed every 2 to 4 completions, and the commits (WAL
      // frames, locks) cost more than the completions (benchmark figure 3).
      // No acknowledgement waits for this; a crash meanwhile only means a
      // resend, as for any completion not yet committed.
      if (urgent_queued_ == 0) {
        wake_.wait_for(lock, stop, kGroupWindow,
                       [this] { return urgent_queued_ > 0 || queue_.size() >= kGroupMax; });
      }
      batch.swap(queue_);
      urgent_queued_ = 0;
    }
    ApplyBatch(batch);
  }
}

void Writer::ApplyBatch(std::deque<Item>& batch) {
  std::stop_token stop = thread_.get_stop_token();
  while (!batch.empty()) {
    // A run of ordinary items shares one transaction; an "alone" item runs
    // by itself, in order.
    std::deque<Item> segment;
    if (batch.front().alone) {
      segment.push_back(std::move(batch.front()));
      batch.pop_front();
    } else {
      while (!batch.empty() && !batch.front().alone) {
        segment.push_back(std::move(batch.front()));
        batch.pop_front();
      }
    }
    if (segment.size() > 1 && !Commit(segment, stop)) {
      // Something in the group failed for a reason other than a lock: find
      // it by applying each item on its own, so one bad item costs only itself.
      for (auto& item : segment) {
        std::deque<Item> one;
        one.push_back(std::move(item));
        Commit(one, stop);
      }
    } else if (segment.size() == 1) {
      Commit(segment, stop);
    }
  }
}

namespace {

using Successors = std::vector<std::pair<SuccessorClaims*, std::vector<store::Claimed>>>;

// Claims the next rows of `keys`, one call per claimer and topic, adding
// them to what that claimer gets after the commit.
void ClaimSuccessors(store::Store& s, std::span<const NextOfKey* const> keys, Successors& claimed) {
  std::vector<bool> done(keys.size(), false);
  std::vector<std::string> same;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (done[i]) continue;
    same.clear();
    for (std::size_t j = i; j < keys.size(); ++j) {
      if (!done[j] && keys[j]->claims == keys[i]->claims && keys[j]->topic == keys[i]->topic) {
        same.push_back(keys[j]->ordering_key);
        done[j] = true;
      }
    }
    auto rows = keys[i]->claims->Claim(s, keys[i]->topic, same);
    if (rows.empty()) continue;
    auto to = std::find_if(claimed.begin(), claimed.end(),
                           [&](const auto& c) { return c.first == keys[i]->claims; });
    if (to == claimed.end()) to = claimed.insert(claimed.end(), {keys[i]->claims, {}});
    std::move(rows.begin(), rows.end(), std::back_inserter(to->second));
  }
}

}  // namespace

void Writer::ApplyAndCommit(std::deque<Item>& segment, Item*& current) {
  Successors successors;
  if (segment.front().alone) {
    segment.front().task.apply(*store_);
  } else {
    store::Store::WriteTransaction txn(*store_);
    // Plain completions wait for the next task that does more (or the end)
    // and go in one statement, followed by one claim of their keys' next
    // rows: the order of changes stays the queue's.
    std::vector<store::DeliveredLease> completions;
    std::vector<const NextOfKey*> next_of;
    const auto record = [&] {
      current = nullptr;
      if (!completions.empty()) store_->Complete(completions);
      completions.clear();
      if (!next_of.empty()) ClaimSuccessors(*store_, next_of, successors);
      next_of.clear();
    };
    for (auto& item : segment) {
      if (item.task.complete) completions.push_back(*item.task.complete);
      if (item.task.apply) {
        record();
        current = &item;
        item.task.apply(*store_);
      }
      if (item.task.claim_next) next_of.push_back(&*item.task.claim_next);
    }
    record();
    txn.Commit();
  }
  {
    std::lock_guard lock(mutex_);
    ++transactions_;
  }
  // Before anyone waiting for this commit goes on.
  for (auto& [claims, rows] : successors) {
    try {
      claims->HandOver(std::move(rows));
    } catch (const std::exception& e) {
      logger_->error("writer: handing over claimed rows failed: {}", e.what());
    }
  }
  for (auto& item : segment) {
    if (item.task.after_commit) {
      try {
        item.task.after_commit();
      } catch (const std::exception& e) {
        logger_->error("writer: after-commit action failed: {}", e.what());
      }
    }
    if (item.done) item.done->set_value();
  }
}

bool Writer::RedoWithoutHook(Item* current, const TransactionEnded& e) {
  if (current == nullptr || !current->task.apply_after_abort) return false;
  auto fallback = std::move(current->task.apply_after_abort);
  current->task.apply_after_abort = nullptr;
  current->task.apply = [fallback = std::move(fallback),
                         error = std::string(e.what())](store::Store& s) { fallback(s, error); };
  logger_->warn("writer: a completion hook ended the transaction ({}); redoing the group "
                "without it",
                e.what());
  return true;
}

// A Run caller gets the error (and reports it); an asynchronous change is
// lost here, which only means the row's lease expires and it is sent again
// (at-least-once).
void Writer::GiveUp(Item& item, const std::exception_ptr& failure) {
  if (item.done) {
    item.done->set_exception(failure);
    return;
  }
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    ReportGiveUp(e.what());
  } catch (...) {
    ReportGiveUp("unknown error");
  }
}

bool Writer::Commit(std::deque<Item>& segment, std::stop_token& stop) {
  constexpr int kAttemptsWhenStopping = 3;
  constexpr int kAttemptsOnError = 3;
  int errors = 0;
  for (int attempt = 0;; ++attempt) {
    std::exception_ptr failure;
    bool busy = false;
    Item* current = nullptr;
    try {
      ApplyAndCommit(segment, current);
      return true;
    } catch (const TransactionEnded& e) {
      // A hook ended the transaction: everyone's changes are gone. Redo the
      // group with that message's fallback (its hook recorded as failed),
      // so that one hook costs the others nothing.
      if (RedoWithoutHook(current, e)) continue;
      failure = std::current_exception();
    } catch (const store::StoreError& e) {
      // Also a failed fsync after COMMIT (claims made in the transaction):
      // the group is committed then, its redo changes nothing, and the rows
      // it claimed are sent once their lease lapses.
      busy = e.busy();
      failure = std::current_exception();
    } catch (...) {
      failure = std::current_exception();
    }

    const bool stopping = stop.stop_requested();
    if (busy && !(stopping && attempt + 1 >= kAttemptsWhenStopping)) {
      // Another process holds the write lock beyond the busy timeout. Nothing
      // of this group was applied; try it again, a little later each time.
      const auto pause = std::chrono::milliseconds(std::min(500, 10 << std::min(attempt, 6)));
      if (attempt % 10 == 0) logger_->warn("writer: database busy, retrying (attempt {})", attempt + 1);
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, stop, pause, [] { return false; });
      continue;
    }
    if (segment.size() > 1) return false;
    if (!busy && ++errors < kAttemptsOnError && !stopping) continue;
    GiveUp(segment.front(), failure);
    return false;
  }
}

void Writer::ReportGiveUp(const std::string& what) {
  // A full or broken disk fails every state change alike, many per second:
  // one line per interval says it all.
  constexpr auto kInterval = std::chrono::seconds(10);
  const auto now = std::chrono::steady_clock::now();
  ++unreported_failures_;
  if (reported_once_ && now - last_report_ < kInterval) return;
  if (unreported_failures_ == 1) {
    logger_->error("writer: giving up on a state change: {}", what);
  } else {
    logger_->error("writer: giving up on a state change: {} ({} more since the last report)",
                   what, unreported_failures_ - 1);
  }
  reported_once_ = true;
  last_report_ = now;
  unreported_failures_ = 0;
}

}  // namespace outbox::agent
