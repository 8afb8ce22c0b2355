// The sidecar's completion hooks: one SQL statement per topic and outcome
// from the config, which the store prepares under its hook authorizer and
// runs with the message's named parameters. Not installed.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "outbox/agent.h"

namespace outbox::agent {

// A CompletionHook that runs `sql` through store::RunHookSql: prepared again
// under the authorizer each time (a schema change since the check is caught
// again), bound to the Completion and stepped. Throws std::runtime_error
// carrying the reason on failure.
CompletionHook MakeSqlHook(std::string sql);

// Every topic's on_delivered_sql and on_dead_sql with the key errors name.
std::vector<std::pair<std::string, std::string>> TopicHookSql(const Options& options);

// store::CheckHookSql for every topic's hooks on `db`; throws
// std::invalid_argument naming the key.
void CheckTopicHooks(sqlite3* db, const Options& options);

// The config key of a topic's hook, as errors name it:
// topics."<topic>".<which>.
std::string HookKey(std::string_view topic, std::string_view which);

}  // namespace outbox::agent
