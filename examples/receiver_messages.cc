#include "receiver_messages.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstddef>

namespace outbox::receiver {
namespace {

// Deeper JSON is refused before it is parsed: a member is written back out
// (rapidjson's writer recurses), and no sender's event nests this deep.
constexpr int kMaxNesting = 64;

bool IsMediaType(std::string_view content_type, std::string_view media_type) {
  const std::string_view bare = content_type.substr(0, content_type.find(';'));
  const std::size_t end = bare.find_last_not_of(" \t");
  const std::string_view trimmed = bare.substr(0, end == std::string_view::npos ? 0 : end + 1);
  if (trimmed.size() != media_type.size()) return false;
  for (std::size_t i = 0; i < trimmed.size(); ++i) {
    const char c = trimmed[i];
    if ((c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) != media_type[i]) return false;
  }
  return true;
}

// The deepest nesting of arrays and objects in `text` (strings skipped).
int Nesting(std::string_view text) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// A member's `id` (and `source`), or a refusal naming the member.
std::optional<std::string> MemberMessage(const rapidjson::Value& member, std::size_t index,
                                         std::string body, Split& split) {
  const std::string where = "batch member " + std::to_string(index + 1);
  if (!member.IsObject()) return where + ": not a JSON object";
  const auto id = member.FindMember("id");
  if (id == member.MemberEnd() || !id->value.IsString() || id->value.GetStringLength() == 0) {
    return where + ": no \"id\" string";
  }
  ReceivedMessage message{std::string(id->value.GetString(), id->value.GetStringLength()),
                          std::move(body), std::nullopt};
  const auto source = member.FindMember("source");
  if (source != member.MemberEnd() && source->value.IsString()) {
    message.source.emplace(source->value.GetString(), source->value.GetStringLength());
  }
  split.messages.push_back(std::move(message));
  return std::nullopt;
}

Split SplitNdjson(std::string_view body) {
  Split split;
  std::size_t index = 0;
  for (std::size_t start = 0; start < body.size();) {
    std::size_t end = body.find('\n', start);
    if (end == std::string_view::npos) end = body.size();
    const std::string_view line = body.substr(start, end - start);
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    rapidjson::Document member;
    member.Parse<rapidjson::kParseIterativeFlag>(line.data(), line.size());
    if (member.HasParseError()) {
      split.refusal = "batch member " + std::to_string(index + 1) + ": not JSON";
      return split;
    }
    if (auto refusal = MemberMessage(member, index++, std::string(line), split)) {
      split.refusal = *refusal;
      return split;
    }
  }
  if (split.messages.empty()) split.refusal = "batch: no members";
  return split;
}

Split SplitCloudEventsBatch(std::string_view body) {
  Split split;
  rapidjson::Document batch;
  batch.Parse<rapidjson::kParseIterativeFlag>(body.data(), body.size());
  if (batch.HasParseError() || !batch.IsArray() || batch.Empty()) {
    split.refusal = "batch: expected a non-empty JSON array of CloudEvents";
    return split;
  }
  for (rapidjson::SizeType i = 0; i < batch.Size(); ++i) {
    rapidjson::StringBuffer text;
    rapidjson::Writer<rapidjson::StringBuffer> writer(text);
    batch[i].Accept(writer);  // nesting bounded by kMaxNesting
    if (auto refusal =
            MemberMessage(batch[i], i, std::string(text.GetString(), text.GetSize()), split)) {
      split.refusal = *refusal;
      return split;
    }
  }
  return split;
}

}  // namespace

Split SplitRequest(const RequestIdentity& identity, std::string_view body, bool signed_request) {
  Split split;
  // The request's own identity: signed, it is webhook-id, and an
  // Idempotency-Key that says otherwise is a forgery or a broken sender.
  std::string key = signed_request ? identity.webhook_id : identity.idempotency_key;
  if (signed_request && !identity.idempotency_key.empty() &&
      identity.idempotency_key != identity.webhook_id) {
    split.refusal = "Idempotency-Key: differs from webhook-id, which the signature covers";
    return split;
  }
  const bool ndjson = IsMediaType(identity.content_type, "application/x-ndjson");
  if (ndjson || IsMediaType(identity.content_type, "application/cloudevents-batch+json")) {
    if (Nesting(body) > kMaxNesting) {
      split.refusal = "batch: JSON nested deeper than " + std::to_string(kMaxNesting);
      return split;
    }
    return ndjson ? SplitNdjson(body) : SplitCloudEventsBatch(body);
  }
  if (key.empty()) {
    split.refusal = signed_request ? "webhook-id: missing" : "Idempotency-Key: missing";
    return split;
  }
  std::optional<std::string> source;
  if (!identity.ce_source.empty()) source = identity.ce_source;
  split.messages.push_back({std::move(key), std::string(body), std::move(source)});
  return split;
}

}  // namespace outbox::receiver
