#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "outbox/transport.h"

namespace outbox::transport {
namespace {

constexpr std::int64_t kCreatedAtMs = 1'614'265'330'123;
constexpr char kTime[] = "2021-02-25T15:02:10.123Z";

EndpointOptions Options() {
  EndpointOptions options;
  options.url = "http://127.0.0.1:9/events";
  options.ce_source = "urn:test";
  return options;
}

Message MessageWith(std::string_view id, std::string_view payload,
                    std::span<const Header> headers = {}) {
  return {.message_id = id,
          .topic = "t",
          .payload = payload,
          .headers = headers,
          .created_at_ms = kCreatedAtMs};
}

std::string NdjsonLine(const Message& message) {
  const std::vector<Message> one = {message};
  return BuildNdjsonBatch(one);
}

TEST(BuildNdjsonBatch, WritesOneCompactLinePerMessage) {
  const std::vector<Message> messages = {MessageWith("id-1", "{ \"a\" :\n [1, true] }"),
                                         MessageWith("id-2", "not json")};
  EXPECT_EQ(BuildNdjsonBatch(messages), std::string(R"({"id":"id-1","topic":"t","time":")") +
                                            kTime + R"(","payload":{"a":[1,true]}})" + "\n" +
                                            R"({"id":"id-2","topic":"t","time":")" + kTime +
                                            R"(","payload_base64":"bm90IGpzb24="})" + "\n");
}

TEST(BuildNdjsonBatch, KeepsNumbersAndStringsExactly) {
  EXPECT_EQ(NdjsonLine(MessageWith("i", R"([2.50, 12345678901234567890123, -0, 1E+2])")),
            std::string(R"({"id":"i","topic":"t","time":")") + kTime +
                R"(","payload":[2.50,12345678901234567890123,-0,1E+2]})" + "\n");
  EXPECT_EQ(NdjsonLine(MessageWith("i", "\"line\\nbreak caf\xC3\xA9 \\u00e9\"")),
            std::string(R"({"id":"i","topic":"t","time":")") + kTime +
                "\",\"payload\":\"line\\nbreak caf\xC3\xA9 \xC3\xA9\"}\n");
}

TEST(BuildNdjsonBatch, FallsBackToBase64ForAnythingThatIsNotJson) {
  for (const std::string& payload :
       {std::string("\x00\x01\xFF", 3), std::string("{}\0{}", 5), std::string("\"\xFF\""),
        std::string("{} {}"), std::string(""), std::string("  "), std::string("{\"a\":}")}) {
    const std::string line = NdjsonLine(MessageWith("i", payload));
    EXPECT_NE(line.find("\"payload_base64\":"), std::string::npos) << line;
  }
  EXPECT_NE(NdjsonLine(MessageWith("i", std::string("\x00\x01\xFF", 3))).find("\"AAH/\""),
            std::string::npos);
}

// Compact JSON is copied without a parse (IsMinimalJson); these pin that
// the copy gives exactly what the full parse and re-write gave before.
TEST(BuildNdjsonBatch, CopiesCompactJsonAsTheParseWouldWriteIt) {
  const auto payload_of = [](std::string_view payload) {
    const std::string line = NdjsonLine(MessageWith("i", payload));
    const std::string prefix = std::string(R"({"id":"i","topic":"t","time":")") + kTime + "\",";
    EXPECT_EQ(line.substr(0, prefix.size()), prefix);
    return line.substr(prefix.size(), line.size() - prefix.size() - 2);  // less "}\n"
  };
  for (const std::string_view same :
       {R"({"a":[1,true,null,false,-0.5e-3,"x\"y\\z\n\t\r\b\f"],"b":{},"c":[]})",
        "\"caf\xC3\xA9 \xF0\x9F\x98\x80\"", R"(0)", R"(-12.5E+07)", R"([[],[{}]])",
        "\"\x7F\"", R"(12345678901234567890123)"}) {
    EXPECT_EQ(payload_of(same), "\"payload\":" + std::string(same)) << same;
  }
  // Escapes the writer spells another way, and a nesting past the fast path.
  EXPECT_EQ(payload_of(R"(["\u0041\/","\u001f"])"), R"("payload":["A/","\u001F"])");
  const std::string deep = std::string(70, '[') + std::string(70, ']');
  EXPECT_EQ(payload_of(deep), "\"payload\":" + deep);
  // Not one JSON document (or a number the parser refuses as too big).
  for (const std::string_view bad :
       {"{}x", R"({"a":1,})", "[1,]", R"({"a"})", "01", "-", "1.", "1e", "[1e400]",
        "\"\x01\"", "\"\xED\xA0\x80\"", "\"\xC0\xAF\"", "[", R"({"a":[}])", "tru",
        "nul", "\"abc"}) {
    EXPECT_EQ(payload_of(bad).rfind("\"payload_base64\":", 0), 0u) << bad;
  }
}

TEST(BuildNdjsonBatch, SurvivesDeepNesting) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(NdjsonLine(MessageWith("i", deep)).find("\"payload\":[[[["), std::string::npos);
}

TEST(BuildNdjsonBatch, RejectsATopicThatIsNotUtf8) {
  Message message = MessageWith("i", "{}");
  message.topic = "\xFF";
  EXPECT_THROW(NdjsonLine(message), std::invalid_argument);
}

TEST(BuildCloudEvent, EmbedsJsonDataWithAJsonContentType) {
  EXPECT_EQ(BuildCloudEvent(Options(), MessageWith("id-1", "{\"a\": 1}")),
            std::string(R"({"specversion":"1.0","id":"id-1","source":"urn:test","type":"t",)") +
                R"("time":")" + kTime +
                R"(","datacontenttype":"application/json","data":{"a":1}})");
}

TEST(BuildCloudEvent, UsesDataBase64Otherwise) {
  const Headers text = {{"Content-Type", "text/plain"}};
  EXPECT_EQ(BuildCloudEvent(Options(), MessageWith("id-1", "{\"a\": 1}", text)),
            std::string(R"({"specversion":"1.0","id":"id-1","source":"urn:test","type":"t",)") +
                R"("time":")" + kTime +
                R"(","datacontenttype":"text/plain","data_base64":"eyJhIjogMX0="})");
  const Headers cloudevents_json = {{"Content-Type", "application/cloudevents+json"}};
  EXPECT_NE(BuildCloudEvent(Options(), MessageWith("i", "oops", cloudevents_json))
                .find("\"data_base64\":\"b29wcw==\""),
            std::string::npos);
}

TEST(BuildBody, IsThePayloadUnlessStructured) {
  EndpointOptions options = Options();
  const Message message = MessageWith("id-1", "{\"a\": 1}");
  EXPECT_EQ(BuildBody(options, message), "{\"a\": 1}");
  options.cloudevents = CloudEventsMode::kBinary;
  EXPECT_EQ(BuildBody(options, message), "{\"a\": 1}");
  options.cloudevents = CloudEventsMode::kStructured;
  EXPECT_EQ(BuildBody(options, message), BuildCloudEvent(options, message));
}

TEST(BuildCloudEventsBatch, IsAnArrayOfEvents) {
  const std::vector<Message> messages = {MessageWith("id-1", "1"), MessageWith("id-2", "2")};
  EXPECT_EQ(BuildCloudEventsBatch(Options(), messages),
            "[" + BuildCloudEvent(Options(), messages[0]) + "," +
                BuildCloudEvent(Options(), messages[1]) + "]");
}

TEST(ParseRowHeaders, ReadsAnObjectOfStrings) {
  EXPECT_EQ(ParseRowHeaders(R"({"X-Tenant":"acme","Content-Type":"text/plain"})"),
            (Headers{{"X-Tenant", "acme"}, {"Content-Type", "text/plain"}}));
  EXPECT_TRUE(ParseRowHeaders("").empty());
  EXPECT_TRUE(ParseRowHeaders("{}").empty());
}

TEST(ParseRowHeaders, RejectsAnythingElseNamingTheColumn) {
  const auto error_of = [](std::string_view json) -> std::string {
    try {
      ParseRowHeaders(json);
    } catch (const std::invalid_argument& error) {
      return error.what();
    }
    return "";
  };
  EXPECT_EQ(error_of("[]"), "headers: not a JSON object");
  EXPECT_EQ(error_of("{"), "headers: not a JSON object");
  EXPECT_EQ(error_of("null"), "headers: not a JSON object");
  EXPECT_EQ(error_of(std::string("{}\0x", 4)), "headers: not a JSON object");
  EXPECT_EQ(error_of(R"({"X-Count":3})"), "headers: value of \"X-Count\" is not a string");
}

}  // namespace
}  // namespace outbox::transport
