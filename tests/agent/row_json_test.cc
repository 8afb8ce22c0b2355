// The row JSON shared by the retention archive and `outboxctl --json`.
#include "row_json.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <string>

namespace outbox::row_json {
namespace {

store::Row SampleRow() {
  store::Row row;
  row.id = 7;
  row.topic = "order.created";
  row.key = "k\xFF";  // not UTF-8: another application wrote it
  row.payload = R"({"n":1})";
  row.headers_json = R"({"X-A":"1"})";
  row.status = store::Status::kDelivered;
  row.attempts = 2;
  row.next_attempt_at = 5;
  row.created_at = -1;
  row.updated_at = 1000;
  row.last_error = "HTTP 503";
  row.crashes = 1;
  row.operator_retries = 3;
  row.schema_version = "2";
  row.expires_at = 9000;
  row.acked_at = 800;
  return row;
}

rapidjson::Document Parse(const std::string& text) {
  rapidjson::Document document;
  document.Parse<rapidjson::kParseValidateEncodingFlag>(text.c_str(), text.size());
  EXPECT_FALSE(document.HasParseError()) << text;
  return document;
}

TEST(RowJson, WritesEveryColumnWithNullForUnsetOnes) {
  const rapidjson::Document row = Parse(RowToJson(SampleRow()));
  EXPECT_EQ(row["id"].GetInt64(), 7);
  EXPECT_STREQ(row["topic"].GetString(), "order.created");
  EXPECT_STREQ(row["msg_key"].GetString(), "k\xEF\xBF\xBD");
  EXPECT_STREQ(row["status"].GetString(), "delivered");
  EXPECT_EQ(row["attempts"].GetInt(), 2);
  EXPECT_EQ(row["next_attempt_at"].GetInt64(), 5);
  EXPECT_EQ(row["created_at"].GetInt64(), -1);
  EXPECT_EQ(row["updated_at"].GetInt64(), 1000);
  EXPECT_EQ(row["delivered_at"].GetInt64(), 1000);
  EXPECT_TRUE(row["lease_owner"].IsNull());
  EXPECT_STREQ(row["last_error"].GetString(), "HTTP 503");
  EXPECT_EQ(row["crashes"].GetInt(), 1);
  EXPECT_EQ(row["operator_retries"].GetInt(), 3);
  EXPECT_STREQ(row["schema_version"].GetString(), "2");
  EXPECT_EQ(row["expires_at"].GetInt64(), 9000);
  EXPECT_EQ(row["acked_at"].GetInt64(), 800);
  EXPECT_TRUE(row["deliver_at"].IsNull());
  EXPECT_TRUE(row["dead_reason"].IsNull());
  EXPECT_TRUE(row["ordering_key"].IsNull());
  EXPECT_EQ(row["payload_bytes"].GetUint64(), 7u);
  EXPECT_FALSE(row.HasMember("payload"));
  EXPECT_FALSE(row.HasMember("message_id"));
}

TEST(RowJson, PendingRowsHaveNoDeliveredAt) {
  store::Row row = SampleRow();
  row.status = store::Status::kPending;
  EXPECT_FALSE(Parse(RowToJson(row)).HasMember("delivered_at"));
}

TEST(RowJson, TextPayloadAsTextBinaryPayloadAsBase64) {
  RowJsonOptions options;
  options.with_payload = true;
  store::Row row = SampleRow();
  const rapidjson::Document text = Parse(RowToJson(row, options));
  EXPECT_STREQ(text["payload"].GetString(), R"({"n":1})");
  EXPECT_STREQ(text["headers"].GetString(), R"({"X-A":"1"})");
  row.payload = std::string("\0\xFF", 2);
  row.headers_json.reset();
  const rapidjson::Document binary = Parse(RowToJson(row, options));
  EXPECT_FALSE(binary.HasMember("payload"));
  EXPECT_STREQ(binary["payload_base64"].GetString(), "AP8=");
  EXPECT_TRUE(binary["headers"].IsNull());
}

TEST(RowJson, ArchiveLineIsOneLineWithBase64PayloadAndMessageId) {
  const std::string line = ArchiveLine(SampleRow(), "msg-1");
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const rapidjson::Document row = Parse(line);
  EXPECT_STREQ(row["message_id"].GetString(), "msg-1");
  EXPECT_STREQ(row["payload_base64"].GetString(), "eyJuIjoxfQ==");
  EXPECT_FALSE(row.HasMember("payload"));
}

TEST(RowJson, RowsAreOneArray) {
  const rapidjson::Document rows = Parse(RowsToJson({SampleRow(), SampleRow()}));
  ASSERT_TRUE(rows.IsArray());
  EXPECT_EQ(rows.Size(), 2u);
  EXPECT_TRUE(Parse(RowsToJson({})).IsArray());
}

TEST(RowJson, StatsCarryLimitsAndAgesPerTopic) {
  store::Stats stats;
  stats.undelivered = 4;
  stats.limits.max_pending = 100;
  stats.counts.push_back({"a\xFF", store::Status::kPending, 4, 1000});
  const rapidjson::Document json = Parse(StatsToJson(stats, "db-1", 3500));
  EXPECT_STREQ(json["database_id"].GetString(), "db-1");
  EXPECT_EQ(json["undelivered"].GetInt64(), 4);
  EXPECT_EQ(json["limits"]["max_pending"].GetInt64(), 100);
  const auto& topic = json["topics"][0];
  EXPECT_STREQ(topic["topic"].GetString(), "a\xEF\xBF\xBD");
  EXPECT_STREQ(topic["status"].GetString(), "pending");
  EXPECT_EQ(topic["count"].GetInt64(), 4);
  EXPECT_DOUBLE_EQ(topic["oldest_age_seconds"].GetDouble(), 2.5);
}

}  // namespace
}  // namespace outbox::row_json
