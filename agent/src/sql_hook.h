// The sidecar's completion hooks: one SQL statement from the config, checked
// by an authorizer and run with the message's named parameters. Not installed.
#pragma once

#include <string>
#include <string_view>

#include "outbox/agent.h"

namespace outbox::agent {

// Prepares `sql` on `db` under an authorizer that allows reading and one
// INSERT, UPDATE, DELETE or REPLACE (upserts included), and nothing that
// controls transactions, attaches, runs a PRAGMA or changes the schema.
// Checks that it is exactly one statement, that it writes, and that every
// parameter is one of the Completion's names. Throws std::invalid_argument
// with the reason (the caller prefixes the key). Changes nothing.
void CheckSqlHook(sqlite3* db, std::string_view sql);

// A CompletionHook that prepares `sql` the same way (a schema change since
// the check is caught again), binds the Completion's fields and steps it
// once. Throws std::runtime_error carrying SQLite's message on failure.
CompletionHook MakeSqlHook(std::string sql);

// CheckSqlHook for every topic's on_delivered_sql and on_dead_sql; throws
// std::invalid_argument naming the key.
void CheckTopicHooks(sqlite3* db, const Options& options);

// The config key of a topic's hook, as errors name it:
// topics."<topic>".<which>.
std::string HookKey(std::string_view topic, std::string_view which);

}  // namespace outbox::agent
