#include "sql_hook.h"

#include <stdexcept>

namespace outbox::agent {

CompletionHook MakeSqlHook(std::string sql) {
  return [sql = std::move(sql)](sqlite3* db, const Completion& completion) {
    store::RunHookSql(db, sql, completion);
  };
}

std::vector<std::pair<std::string, std::string>> TopicHookSql(const Options& options) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [topic, topic_options] : options.topics) {
    const CompletionHooks& hooks = topic_options.hooks;
    if (!hooks.on_delivered_sql.empty()) {
      out.emplace_back(HookKey(topic, "on_delivered"), hooks.on_delivered_sql);
    }
    if (!hooks.on_dead_sql.empty()) out.emplace_back(HookKey(topic, "on_dead"), hooks.on_dead_sql);
  }
  return out;
}

void CheckTopicHooks(sqlite3* db, const Options& options) {
  for (const auto& [key, sql] : TopicHookSql(options)) {
    try {
      store::CheckHookSql(db, sql);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(key + ": " + e.what());
    }
  }
}

bool CheckHookSql(const Options& options) {
  return store::CheckHookSqlInFile(options.db_path, TopicHookSql(options));
}

std::string HookKey(std::string_view topic, std::string_view which) {
  std::string key = "topics.\"";
  key.append(topic);
  key += "\".";
  key.append(which);
  return key;
}

}  // namespace outbox::agent
