// JSON bodies (CloudEvents structured and batch, NDJSON) and row headers,
// written and read with RapidJSON.
#include <rapidjson/document.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <stdexcept>
#include <string>

#include "internal.h"
#include "outbox/transport.h"
#include "util/base64.h"
#include "util/rfc3339.h"
#include "util/utf8.h"

namespace outbox::transport {
namespace {

// Refuses to write invalid UTF-8, so every body we produce is valid JSON.
using JsonWriter =
    rapidjson::Writer<rapidjson::StringBuffer, rapidjson::UTF8<>, rapidjson::UTF8<>,
                      rapidjson::CrtAllocator, rapidjson::kWriteValidateEncodingFlag>;

// Numbers stay strings while parsing, so a payload's 64-bit ids or decimals
// pass through digit for digit instead of being rounded through a double.
// Iterative parsing keeps a hostile, deeply nested payload off the stack.
constexpr unsigned kPayloadParseFlags = rapidjson::kParseValidateEncodingFlag |
                                        rapidjson::kParseNumbersAsStringsFlag |
                                        rapidjson::kParseIterativeFlag;

// SAX handler copying one document to a compact writer.
class CopyHandler {
 public:
  explicit CopyHandler(JsonWriter& writer) : writer_(writer) {}
  bool Null() { return writer_.Null(); }
  bool Bool(bool value) { return writer_.Bool(value); }
  // Only RawNumber is called under kParseNumbersAsStringsFlag; the rest of
  // the number callbacks exist because the reader's interface needs them.
  bool Int(int value) { return writer_.Int(value); }
  bool Uint(unsigned value) { return writer_.Uint(value); }
  bool Int64(std::int64_t value) { return writer_.Int64(value); }
  bool Uint64(std::uint64_t value) { return writer_.Uint64(value); }
  bool Double(double value) { return writer_.Double(value); }
  bool RawNumber(const char* text, rapidjson::SizeType length, bool) {
    // Writer::RawNumber would quote it; RawValue writes the digits as they are.
    return writer_.RawValue(text, length, rapidjson::kNumberType);
  }
  bool String(const char* text, rapidjson::SizeType length, bool) {
    return writer_.String(text, length);
  }
  bool StartObject() { return writer_.StartObject(); }
  bool Key(const char* text, rapidjson::SizeType length, bool) { return writer_.Key(text, length); }
  bool EndObject(rapidjson::SizeType count) { return writer_.EndObject(count); }
  bool StartArray() { return writer_.StartArray(); }
  bool EndArray(rapidjson::SizeType count) { return writer_.EndArray(count); }

 private:
  JsonWriter& writer_;
};

void WriteString(JsonWriter& writer, std::string_view text, std::string_view field) {
  // Checked here first: RapidJSON's own check (kWriteValidateEncodingFlag)
  // reads a multi-byte sequence cut short at the end of `text` past its end
  // (a heap over-read found by fuzzing a topic ending in 0xE0).
  if (!util::IsValidUtf8(text) ||
      !writer.String(text.data(), static_cast<rapidjson::SizeType>(text.size()))) {
    throw std::invalid_argument(std::string(field) + ": not valid UTF-8");
  }
}

void WriteKey(JsonWriter& writer, std::string_view key) {
  writer.Key(key.data(), static_cast<rapidjson::SizeType>(key.size()));
}

// Writes `payload` under `json_key` as a JSON value when it is JSON (and
// `allow_json`), otherwise base64 under `base64_key`.
void WritePayload(JsonWriter& writer, std::string_view payload, bool allow_json,
                  std::string_view json_key, std::string_view base64_key) {
  // The type only feeds the writer's key/value bookkeeping; any value type
  // other than a string key is the same to it.
  if (allow_json && internal::IsMinimalJson(payload)) {
    WriteKey(writer, json_key);
    writer.RawValue(payload.data(), payload.size(), rapidjson::kObjectType);
    return;
  }
  std::optional<std::string> json;
  if (allow_json) json = internal::MinifyJson(payload);
  if (json) {
    WriteKey(writer, json_key);
    writer.RawValue(json->data(), json->size(), rapidjson::kObjectType);
  } else {
    WriteKey(writer, base64_key);
    WriteString(writer, util::Base64Encode(payload), base64_key);
  }
}

void WriteCloudEvent(JsonWriter& writer, const EndpointOptions& options, const Message& message) {
  const std::string_view content_type = internal::ContentTypeOf(options, message);
  writer.StartObject();
  WriteKey(writer, "specversion");
  WriteString(writer, "1.0", "specversion");
  WriteKey(writer, "id");
  WriteString(writer, message.message_id, "id");
  WriteKey(writer, "source");
  WriteString(writer, options.ce_source, "ce_source");
  WriteKey(writer, "type");
  WriteString(writer, message.topic, "topic");
  WriteKey(writer, "time");
  WriteString(writer, util::FormatRfc3339(message.created_at_ms), "time");
  WriteKey(writer, "datacontenttype");
  WriteString(writer, content_type, "headers[Content-Type]");
  if (const std::string schema = internal::DataSchemaOf(options, message); !schema.empty()) {
    WriteKey(writer, "dataschema");
    WriteString(writer, schema, "dataschema");
  }
  // Distributed-tracing extension attributes from the row's trace context.
  for (const char* name : {"traceparent", "tracestate"}) {
    const std::string_view value = internal::RowHeader(message, name);
    if (value.empty()) continue;
    WriteKey(writer, name);
    WriteString(writer, value, name);
  }
  // CloudEvents JSON format 3.1: JSON data goes in "data" only when the
  // content type says JSON; anything else travels as data_base64.
  WritePayload(writer, message.payload, internal::IsJsonContentType(content_type), "data",
               "data_base64");
  writer.EndObject();
}

}  // namespace

namespace internal {
namespace {

// The pieces of IsMinimalJson. Each takes the text and the position of the
// token's first byte and returns the position after it, or npos.
constexpr std::size_t kNo = std::string_view::npos;

// A string with no escape the writer would spell otherwise: a \u escape or
// an escaped slash comes back as other bytes, so it takes the full parse.
std::size_t ScanString(std::string_view text, std::size_t at) {
  for (++at; at < text.size();) {
    const auto c = static_cast<unsigned char>(text[at]);
    if (c == '"') return at + 1;
    if (c == '\\') {
      if (at + 1 >= text.size()) return kNo;
      const char e = text[at + 1];
      if (e != '"' && e != '\\' && e != 'b' && e != 'f' && e != 'n' && e != 'r' && e != 't') {
        return kNo;
      }
      at += 2;
    } else if (c < 0x20) {
      return kNo;  // a raw control character: not JSON
    } else if (c < 0x80) {
      ++at;
    } else {
      const std::size_t length = util::Utf8SequenceAt(text, at);
      if (length == 0) return kNo;
      at += length;
    }
  }
  return kNo;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// RFC 8259 number grammar, and short enough (at most 2 exponent digits, 40
// bytes) that the parser cannot refuse it as too big.
std::size_t ScanNumber(std::string_view text, std::size_t at) {
  const std::size_t start = at;
  const auto digits = [&] {
    const std::size_t first = at;
    while (at < text.size() && IsDigit(text[at])) ++at;
    return at - first;
  };
  if (at < text.size() && text[at] == '-') ++at;
  if (at < text.size() && text[at] == '0') {
    ++at;
  } else if (digits() == 0) {
    return kNo;
  }
  if (at < text.size() && text[at] == '.') {
    ++at;
    if (digits() == 0) return kNo;
  }
  if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
    ++at;
    if (at < text.size() && (text[at] == '+' || text[at] == '-')) ++at;
    const std::size_t exponent = digits();
    if (exponent == 0 || exponent > 2) return kNo;
  }
  return at - start <= 40 ? at : kNo;
}

std::size_t ScanValue(std::string_view text, std::size_t at) {
  if (at >= text.size()) return kNo;
  const char c = text[at];
  if (c == '"') return ScanString(text, at);
  for (const std::string_view literal : {"true", "false", "null"}) {
    if (c == literal[0]) return text.substr(at, literal.size()) == literal ? at + literal.size() : kNo;
  }
  return ScanNumber(text, at);
}

}  // namespace

bool IsMinimalJson(std::string_view text) {
  // Open containers, innermost last; deeper documents take the full parse.
  constexpr std::size_t kMaxDepth = 64;
  char opened[kMaxDepth];
  std::size_t depth = 0;
  std::size_t at = 0;
  for (;;) {
    // A value starts at `at`.
    if (at >= text.size()) return false;
    if (text[at] == '{' || text[at] == '[') {
      if (depth == kMaxDepth) return false;
      opened[depth++] = text[at++];
      const char closing = opened[depth - 1] == '{' ? '}' : ']';
      if (at < text.size() && text[at] == closing) {
        --depth;
        ++at;
      } else if (opened[depth - 1] == '{') {
        if (at >= text.size() || text[at] != '"') return false;
        at = ScanString(text, at);
        if (at == kNo || at >= text.size() || text[at] != ':') return false;
        ++at;
        continue;
      } else {
        continue;
      }
    } else {
      at = ScanValue(text, at);
      if (at == kNo) return false;
    }
    // After a value: close containers, or go on after a comma.
    for (;;) {
      if (depth == 0) return at == text.size();
      if (at >= text.size()) return false;
      const char inner = opened[depth - 1];
      if (text[at] == (inner == '{' ? '}' : ']')) {
        --depth;
        ++at;
        continue;
      }
      if (text[at] != ',') return false;
      ++at;
      if (inner == '{') {
        if (at >= text.size() || text[at] != '"') return false;
        at = ScanString(text, at);
        if (at == kNo || at >= text.size() || text[at] != ':') return false;
        ++at;
      }
      break;
    }
  }
}

std::optional<std::string> MinifyJson(std::string_view payload) {
  if (IsMinimalJson(payload)) return std::string(payload);
  // The reader treats a NUL byte as the end of input; valid JSON has none.
  if (payload.find('\0') != std::string_view::npos) return std::nullopt;
  rapidjson::MemoryStream stream(payload.data(), payload.size());
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  CopyHandler handler(writer);
  rapidjson::Reader reader;
  if (reader.Parse<kPayloadParseFlags>(stream, handler).IsError()) return std::nullopt;
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace internal

Headers ParseRowHeaders(std::string_view headers_json) {
  if (headers_json.empty()) return {};
  const auto fail = [](std::string_view why) {
    throw std::invalid_argument("headers: " + std::string(why));
  };
  if (headers_json.find('\0') != std::string_view::npos) fail("not a JSON object");
  rapidjson::Document document;
  document.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag>(
      headers_json.data(), headers_json.size());
  if (document.HasParseError() &&
      (document.GetParseError() == rapidjson::kParseErrorStringInvalidEncoding ||
       document.GetParseError() == rapidjson::kParseErrorStringUnicodeSurrogateInvalid)) {
    fail("not valid UTF-8 (or a \\u escape of a lone surrogate)");
  }
  if (document.HasParseError() || !document.IsObject()) fail("not a JSON object");
  Headers headers;
  // Indexing, not iterating: RapidJSON 1.1's iterator comparison is
  // ambiguous under C++20's reversed operators.
  for (rapidjson::SizeType i = 0; i < document.MemberCount(); ++i) {
    // ptrdiff_t: the iterator's difference type on 32- and 64-bit targets.
    const auto& member = document.MemberBegin()[static_cast<std::ptrdiff_t>(i)];
    std::string name(member.name.GetString(), member.name.GetStringLength());
    if (!member.value.IsString()) fail("value of \"" + name + "\" is not a string");
    headers.emplace_back(std::move(name),
                         std::string(member.value.GetString(), member.value.GetStringLength()));
  }
  return headers;
}

std::string BuildCloudEvent(const EndpointOptions& options, const Message& message) {
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  WriteCloudEvent(writer, options, message);
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string BuildBody(const EndpointOptions& options, const Message& message) {
  if (options.cloudevents == CloudEventsMode::kStructured) {
    return BuildCloudEvent(options, message);
  }
  return std::string(message.payload);
}

std::string BuildNdjsonBatch(std::span<const Message> messages) {
  std::string body;
  for (const Message& message : messages) {
    rapidjson::StringBuffer buffer;
    JsonWriter writer(buffer);
    writer.StartObject();
    WriteKey(writer, "id");
    WriteString(writer, message.message_id, "id");
    WriteKey(writer, "topic");
    WriteString(writer, message.topic, "topic");
    WriteKey(writer, "time");
    WriteString(writer, util::FormatRfc3339(message.created_at_ms), "time");
    WritePayload(writer, message.payload, /*allow_json=*/true, "payload", "payload_base64");
    writer.EndObject();
    body.append(buffer.GetString(), buffer.GetSize()).append("\n");
  }
  return body;
}

std::string BuildCloudEventsBatch(const EndpointOptions& options,
                                  std::span<const Message> messages) {
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  writer.StartArray();
  for (const Message& message : messages) WriteCloudEvent(writer, options, message);
  writer.EndArray();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace outbox::transport
