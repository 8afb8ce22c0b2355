// Operator actions: mark delivered, cancel, retry, purge dead, the
// reconciliation's repairs, and the audit trail they leave.
#include <sqlite3.h>

#include <memory>
#include <string>
#include <unordered_map>

#include "internal.h"
#include "operator_impl.h"
#include "sql.h"
#include "util/rfc3339.h"

namespace outbox::store {
namespace {

using internal::StatementUse;
using internal::Wrap;

// The statements of one selector form (sql.h's OUTBOX_OPERATOR_STATEMENTS).
struct FormStatements {
  const char* in_flight;
  const char* mark_delivered;
  const char* cancel;
  const char* retry;
  const char* purge_dead;
  const char* select_ids;
};

constexpr FormStatements kIdStatements{sql::kInFlightById,  sql::kMarkDeliveredById, sql::kCancelById,
                               sql::kRetryById,     sql::kPurgeDeadById,     sql::kSelectIdsById};
constexpr FormStatements kTopicStatements{sql::kInFlightByTopic,  sql::kMarkDeliveredByTopic,
                                  sql::kCancelByTopic,    sql::kRetryByTopic,
                                  sql::kPurgeDeadByTopic, sql::kSelectIdsByTopic};
constexpr FormStatements kAllStatements{sql::kInFlightAll,  sql::kMarkDeliveredAll, sql::kCancelAll,
                              sql::kRetryAll,     sql::kPurgeDeadAll,     sql::kSelectIdsAll};

enum class Form { kById, kByTopic, kForAll };

Form FormOf(const RowSelector& selector) {
  const int chosen = (selector.id ? 1 : 0) + (selector.topic ? 1 : 0) + (selector.all ? 1 : 0);
  if (chosen != 1) {
    throw std::invalid_argument("selector: choose exactly one of id, topic or all");
  }
  if (selector.key && !selector.topic) {
    throw std::invalid_argument("selector: key needs a topic (keys are unique per topic)");
  }
  if (selector.id && (selector.status || selector.created_before)) {
    throw std::invalid_argument("selector: an id selects one row; give no status or age with it");
  }
  if (selector.id) return Form::kById;
  return selector.topic ? Form::kByTopic : Form::kForAll;
}

const FormStatements& StatementsOf(Form form) {
  switch (form) {
    case Form::kById:
      return kIdStatements;
    case Form::kByTopic:
      return kTopicStatements;
    case Form::kForAll:
      break;
  }
  return kAllStatements;
}

// Binds the parameters the form uses (?1 | ?2..?5 | ?4..?5); binding a
// number the statement does not hold would be an error.
void BindSelector(SQLite::Statement& q, const RowSelector& selector, Form form) {
  if (form == Form::kById) {
    q.bind(1, *selector.id);
    return;
  }
  if (form == Form::kByTopic) {
    q.bind(2, *selector.topic);
    if (selector.key) {
      q.bind(3, *selector.key);
    } else {
      q.bind(3);
    }
  }
  if (selector.status) {
    q.bind(4, static_cast<int>(*selector.status));
  } else {
    q.bind(4);
  }
  if (selector.created_before) {
    q.bind(5, *selector.created_before);
  } else {
    q.bind(5);
  }
}

}  // namespace

std::string RowSelector::Describe() const {
  std::string out;
  const auto add = [&](std::string_view name, std::string_view value) {
    if (!out.empty()) out += ' ';
    out += name;
    out += '=';
    out += value;
  };
  if (id) add("id", std::to_string(*id));
  if (topic) add("topic", *topic);
  if (key) add("key", *key);
  if (all) add("all", "true");
  if (status) add("status", StatusName(*status));
  if (created_before) add("created_before", util::FormatRfc3339(*created_before));
  return out;
}

void internal::OperatorState::Audit(const Actor& actor, std::string_view action,
                                    std::int64_t rows, std::optional<std::int64_t> row_id,
                                    std::string_view detail, std::int64_t now) {
  StatementUse q(Prepare(sql::kAuditAction));
  q->bind(1, now);
  q->bind(2, actor.user);
  q->bind(3, actor.host);
  q->bind(4, std::string(action));
  q->bind(5, rows);
  if (row_id) {
    q->bind(6, *row_id);
  } else {
    q->bind(6);
  }
  q->bind(7, std::string(detail));
  q->exec();
}

namespace {

void RefuseInFlight(internal::OperatorState& impl, const RowSelector& selector, Form form,
                    std::string_view action) {
  StatementUse q(impl.Prepare(StatementsOf(form).in_flight));
  BindSelector(*q, selector, form);
  if (q->executeStep()) {
    throw InFlightError(std::string(action) + ": row " +
                            std::to_string(q->getColumn(0).getInt64()) +
                            " is in flight (an agent is sending it); nothing changed. Try "
                            "again once the send has finished",
                        0);
  }
}

// A guarded update of the selected rows plus its audit row.
int Change(internal::OperatorState& impl, const char* FormStatements::*statement,
           const RowSelector& selector, const Actor& actor, std::string_view action, bool refuse_in_flight,
           std::int64_t now) {
  const Form form = FormOf(selector);
  return impl.Atomically([&] {
    if (refuse_in_flight) RefuseInFlight(impl, selector, form, action);
    int changed = 0;
    {
      StatementUse q(impl.Prepare(StatementsOf(form).*statement));
      BindSelector(*q, selector, form);
      q->bind(6, now);
      changed = q->exec();
    }
    impl.Audit(actor, action, changed, selector.id, selector.Describe(), now);
    return changed;
  });
}

int ForEachId(internal::OperatorState& impl, const char* text, std::span<const std::int64_t> ids,
              const Actor& actor, std::string_view action, std::int64_t now) {
  return impl.Atomically([&] {
    int changed = 0;
    {
      StatementUse q(impl.Prepare(text));
      for (std::int64_t id : ids) {
        q->bind(1, id);
        q->bind(2, now);
        changed += q->exec();
        q->reset();
      }
    }
    impl.Audit(actor, action, changed, ids.size() == 1 ? std::optional(ids[0]) : std::nullopt,
               std::to_string(ids.size()) + " ids given", now);
    return changed;
  });
}
}  // namespace

Operator::Operator(Store& store) : impl_(std::make_unique<Impl>(Impl{{store, {}}})) {}
Operator::~Operator() = default;

int Operator::MarkDelivered(const RowSelector& selector, const Actor& actor, std::int64_t now) {
  return Wrap("mark delivered", [&] {
    return Change(*impl_, &FormStatements::mark_delivered, selector, actor, "mark-delivered",
                         /*refuse_in_flight=*/true, now);
  });
}

int Operator::Cancel(const RowSelector& selector, const Actor& actor, std::int64_t now) {
  return Wrap("cancel", [&] {
    return Change(*impl_, &FormStatements::cancel, selector, actor, "cancel",
                         /*refuse_in_flight=*/true, now);
  });
}

int Operator::Retry(const RowSelector& selector, const Actor& actor, std::int64_t now) {
  return Wrap("retry", [&] {
    return Change(*impl_, &FormStatements::retry, selector, actor, "retry",
                         /*refuse_in_flight=*/false, now);
  });
}

int Operator::PurgeDeadBatch(const RowSelector& selector, int batch) {
  if (batch < 1) throw std::invalid_argument("batch: expected a positive integer");
  const Form form = FormOf(selector);
  return Wrap("purge dead rows", [&] {
    StatementUse q(impl_->Prepare(StatementsOf(form).purge_dead));
    BindSelector(*q, selector, form);
    q->bind(7, batch);
    return q->exec();
  });
}

int Operator::Requeue(std::span<const std::int64_t> ids, const Actor& actor,
                      std::string_view action, std::int64_t now) {
  return Wrap("requeue", [&] {
    return ForEachId(*impl_, sql::kRequeueDelivered, ids, actor, action, now);
  });
}

int Operator::MarkDeliveredIds(std::span<const std::int64_t> ids, const Actor& actor,
                               std::string_view action, std::int64_t now) {
  return Wrap("mark delivered", [&] {
    return ForEachId(*impl_, sql::kMarkDeliveredId, ids, actor, action, now);
  });
}

bool Operator::Restore(const NewMessage& message) {
  return Wrap("restore", [&] {
    StatementUse q(impl_->Prepare(sql::kRestoreMessage));
    q->bind(1, message.topic);
    q->bind(2, message.key);
    q->bind(3, static_cast<const void*>(message.payload.data()),
            static_cast<int>(message.payload.size()));
    if (message.headers_json.empty()) {
      q->bind(4);
    } else {
      q->bind(4, message.headers_json);
    }
    for (const auto& [index, text] : {std::pair{5, &message.schema_version},
                                      std::pair{6, &message.ordering_key}}) {
      text->has_value() ? q->bind(index, **text) : q->bind(index);
    }
    return q->exec() == 1;
  });
}

std::vector<std::int64_t> Operator::SelectIds(const RowSelector& selector, int limit,
                                              std::int64_t after_id) {
  if (limit < 1) throw std::invalid_argument("limit: expected a positive integer");
  const Form form = FormOf(selector);
  return Wrap("select rows", [&] {
    StatementUse q(impl_->Prepare(StatementsOf(form).select_ids));
    BindSelector(*q, selector, form);
    q->bind(7, limit);
    q->bind(8, after_id);
    std::vector<std::int64_t> ids;
    while (q->executeStep()) ids.push_back(q->getColumn(0).getInt64());
    return ids;
  });
}

std::vector<Operator::RowState> Operator::States(std::int64_t after_id, int limit) {
  if (limit < 1) throw std::invalid_argument("limit: expected a positive integer");
  return Wrap("read rows", [&] {
    StatementUse q(impl_->Prepare(sql::kRowStates));
    q->bind(1, after_id);
    q->bind(2, limit);
    std::vector<RowState> states;
    while (q->executeStep()) {
      RowState state;
      state.id = q->getColumn(0).getInt64();
      state.topic = q->getColumn(1).getString();
      state.key = q->getColumn(2).getString();
      state.status = static_cast<Status>(q->getColumn(3).getInt());
      state.created_at = q->getColumn(4).getInt64();
      state.updated_at = q->getColumn(5).getInt64();
      states.push_back(std::move(state));
    }
    return states;
  });
}

void Operator::PublishRuntime(std::string_view agent,
                              std::span<const std::pair<std::string, std::string>> values,
                              std::int64_t now) {
  Wrap("publish runtime state", [&] {
    impl_->Atomically([&] {
      StatementUse q(impl_->Prepare(sql::kPublishRuntime));
      for (const auto& [name, value] : values) {
        q->bind(1, std::string(agent));
        q->bind(2, name);
        q->bind(3, value);
        q->bind(4, now);
        q->exec();
        q->reset();
      }
      return 0;
    });
  });
}

std::vector<Operator::RuntimeEntry> Operator::Runtime() {
  return Wrap("read runtime state", [&] {
    StatementUse q(impl_->Prepare(sql::kListRuntime));
    std::vector<RuntimeEntry> entries;
    while (q->executeStep()) {
      RuntimeEntry entry;
      entry.agent = q->getColumn(0).getString();
      entry.name = q->getColumn(1).getString();
      entry.value = q->getColumn(2).getString();
      entry.updated_at = q->getColumn(3).getInt64();
      entries.push_back(std::move(entry));
    }
    return entries;
  });
}

std::optional<std::string> Operator::RuntimeValue(std::string_view name) {
  return Wrap("read runtime state", [&]() -> std::optional<std::string> {
    StatementUse q(impl_->Prepare(sql::kRuntimeValue));
    q->bind(1, std::string(name));
    if (!q->executeStep() || q->getColumn(0).isNull()) return std::nullopt;
    return q->getColumn(0).getString();
  });
}

void Operator::RecordAudit(const Actor& actor, std::string_view action, std::int64_t rows,
                           std::optional<std::int64_t> row_id, std::string_view detail,
                           std::int64_t now) {
  Wrap("audit", [&] { impl_->Audit(actor, action, rows, row_id, detail, now); });
}

std::vector<AuditEntry> Operator::Audit(std::int64_t since, int limit) {
  if (limit < 1) throw std::invalid_argument("limit: expected a positive integer");
  return Wrap("read audit", [&] {
    StatementUse q(impl_->Prepare(sql::kListAudit));
    q->bind(1, since);
    q->bind(2, limit);
    std::vector<AuditEntry> entries;
    while (q->executeStep()) {
      AuditEntry entry;
      entry.id = q->getColumn(0).getInt64();
      entry.at = q->getColumn(1).getInt64();
      entry.actor = q->getColumn(2).getString();
      entry.host = q->getColumn(3).getString();
      entry.action = q->getColumn(4).getString();
      entry.rows = q->getColumn(5).getInt64();
      if (!q->getColumn(6).isNull()) entry.row_id = q->getColumn(6).getInt64();
      entry.detail = q->getColumn(7).getString();
      entries.push_back(std::move(entry));
    }
    return entries;
  });
}

}  // namespace outbox::store
