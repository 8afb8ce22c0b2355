// Recorder and Expect: what the application enqueued (outbox/testing.h).
#include <rapidjson/document.h>

#include <algorithm>
#include <sstream>

#include "outbox/testing.h"

namespace outbox::testing {
namespace {

constexpr int kPage = 1000;

// The row's headers column: a JSON object of string values (the insert
// trigger checks that); anything else reads as no headers.
std::map<std::string, std::string> ParseHeaders(const std::optional<std::string>& json) {
  std::map<std::string, std::string> headers;
  if (!json) return headers;
  rapidjson::Document doc;
  doc.Parse(json->data(), json->size());
  if (doc.HasParseError() || !doc.IsObject()) return headers;
  // Through a const reference: C++20 finds rapidjson's non-const iterator
  // comparison ambiguous.
  const rapidjson::Value& object = doc;
  for (const auto& member : object.GetObject()) {
    if (member.value.IsString()) {
      headers[member.name.GetString()] =
          std::string(member.value.GetString(), member.value.GetStringLength());
    }
  }
  return headers;
}

Message FromRow(store::Row row) {
  Message m;
  m.id = row.id;
  m.topic = std::move(row.topic);
  m.key = std::move(row.key);
  m.payload = std::move(row.payload);
  m.headers = ParseHeaders(row.headers_json);
  m.schema_version = std::move(row.schema_version);
  m.ordering_key = std::move(row.ordering_key);
  m.deliver_at = row.deliver_at;
  m.expires_at = row.expires_at;
  m.status = row.status;
  m.attempts = row.attempts;
  m.last_error = std::move(row.last_error);
  m.dead_reason = std::move(row.dead_reason);
  return m;
}

bool Matches(const Message& m, const Match& want) {
  if (m.topic != want.topic) return false;
  if (want.key && m.key != *want.key) return false;
  if (want.payload && m.payload != *want.payload) return false;
  if (want.schema_version && m.schema_version != want.schema_version) return false;
  if (want.ordering_key && m.ordering_key != want.ordering_key) return false;
  if (want.status && m.status != *want.status) return false;
  for (const auto& [name, value] : want.headers) {
    const auto found = m.headers.find(name);
    if (found == m.headers.end() || found->second != value) return false;
  }
  return true;
}

// One message as a failure text shows it (payload cut at 200 bytes).
std::string Show(const Message& m) {
  std::ostringstream out;
  out << "  id " << m.id << " " << m.topic << " key=" << m.key << " "
      << store::StatusName(m.status) << " attempts=" << m.attempts << " payload=" << m.payload.substr(0, 200);
  if (m.payload.size() > 200) out << "...";
  for (const auto& [name, value] : m.headers) out << " " << name << "=" << value;
  if (m.schema_version) out << " schema_version=" << *m.schema_version;
  if (m.ordering_key) out << " ordering_key=" << *m.ordering_key;
  out << "\n";
  return out.str();
}

std::string Describe(const Match& want) {
  std::ostringstream out;
  out << "topic=" << want.topic;
  if (want.key) out << " key=" << *want.key;
  if (want.payload) out << " payload=" << *want.payload;
  for (const auto& [name, value] : want.headers) out << " " << name << "=" << value;
  if (want.schema_version) out << " schema_version=" << *want.schema_version;
  if (want.ordering_key) out << " ordering_key=" << *want.ordering_key;
  if (want.status) out << " status=" << store::StatusName(*want.status);
  return out.str();
}

}  // namespace

Recorder::Recorder(const std::string& db_path) {
  store::Options read;
  read.path = db_path;
  read.read_only = true;
  store_ = std::make_unique<store::Store>(read);
}

Recorder::~Recorder() = default;

std::vector<Message> Recorder::Enqueued(std::string_view topic) {
  std::vector<Message> messages;
  store::ListFilter filter;
  if (!topic.empty()) filter.topic = std::string(topic);
  filter.limit = kPage;
  for (;;) {
    std::vector<store::Row> rows = store_->List(filter);
    for (store::Row& row : rows) {
      filter.after_id = std::max(filter.after_id, row.id);
      messages.push_back(FromRow(std::move(row)));
    }
    if (rows.size() < static_cast<std::size_t>(kPage)) break;
  }
  std::sort(messages.begin(), messages.end(),
            [](const Message& a, const Message& b) { return a.id < b.id; });
  return messages;
}

std::vector<Message> Recorder::Enqueued(std::string_view topic, std::string_view key) {
  std::vector<Message> messages = Enqueued(topic);
  std::erase_if(messages, [&](const Message& m) { return m.key != key; });
  return messages;
}

std::optional<Message> Recorder::Get(std::int64_t id) {
  std::optional<store::Row> row = store_->Get(id);
  if (!row) return std::nullopt;
  return FromRow(std::move(*row));
}

Expect::Expect(const std::string& db_path) : recorder_(db_path) {}

std::optional<std::string> Expect::Enqueued(const Match& match, int count) {
  const std::vector<Message> all = recorder_.Enqueued();
  int found = 0;
  for (const Message& m : all) found += Matches(m, match) ? 1 : 0;
  if (count < 0 ? found > 0 : found == count) return std::nullopt;
  std::ostringstream out;
  out << "expected " << (count < 0 ? "a message" : std::to_string(count) + " message(s)")
      << " with " << Describe(match) << ", found " << found << "; the outbox holds "
      << all.size() << ":\n";
  for (const Message& m : all) out << Show(m);
  return out.str();
}

std::optional<std::string> Expect::NothingEnqueued(std::string_view topic) {
  const std::vector<Message> found = recorder_.Enqueued(topic);
  if (found.empty()) return std::nullopt;
  std::ostringstream out;
  out << "expected no message" << (topic.empty() ? "" : " of " + std::string(topic)) << ", found "
      << found.size() << ":\n";
  for (const Message& m : found) out << Show(m);
  return out.str();
}

}  // namespace outbox::testing
