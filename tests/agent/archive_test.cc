#include "archive.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <filesystem>
#include <fstream>

#include "../common/temp_dir.h"
#include "outbox/transport.h"

namespace outbox::agent {
namespace {

store::Row Delivered(std::int64_t id, std::string payload) {
  store::Row row;
  row.id = id;
  row.topic = "order.created";
  row.key = "k" + std::to_string(id);
  row.payload = std::move(payload);
  row.status = store::Status::kDelivered;
  row.attempts = 2;
  row.created_at = 100;
  row.updated_at = 200;
  return row;
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(ArchiveLine, HoldsTheRowWithItsMessageIdAndPayloadInBase64) {
  store::Row row = Delivered(7, std::string("a\0b", 3));
  row.headers_json = R"({"x":"y"})";
  const std::string line = ArchiveLine(row, "db1");
  rapidjson::Document doc;
  ASSERT_FALSE(doc.Parse(line.c_str()).HasParseError()) << line;
  EXPECT_EQ(doc["id"].GetInt64(), 7);
  EXPECT_STREQ(doc["topic"].GetString(), "order.created");
  EXPECT_STREQ(doc["msg_key"].GetString(), "k7");
  EXPECT_EQ(doc["message_id"].GetString(), transport::MessageId("db1", "order.created", "k7"));
  EXPECT_STREQ(doc["payload_base64"].GetString(), "YQBi");
  EXPECT_STREQ(doc["headers"].GetString(), R"({"x":"y"})");
  EXPECT_EQ(doc["attempts"].GetInt(), 2);
  EXPECT_EQ(doc["created_at"].GetInt64(), 100);
  EXPECT_EQ(doc["delivered_at"].GetInt64(), 200);
  EXPECT_NE(ArchiveLine(Delivered(8, "p"), "db1").find(R"("headers":null)"), std::string::npos);
}

TEST(ArchiveFile, AppendsOneLinePerRowAndRotatesAtTheLimit) {
  outbox::testing::TempDir dir;
  const std::string path = dir.File("archive.jsonl");
  ArchiveFile archive(path, 10);
  archive.Append({Delivered(1, "p"), Delivered(2, "p")}, "db1");
  EXPECT_EQ(Lines(path).size(), 2u);
  archive.Append({Delivered(3, "p")}, "db1");  // the file is over 10 bytes: rotated first
  EXPECT_EQ(Lines(path + ".1").size(), 2u);
  ASSERT_EQ(Lines(path).size(), 1u);
  EXPECT_NE(Lines(path)[0].find("\"id\":3"), std::string::npos);
}

TEST(ArchiveFile, AnUnwritablePathIsAnErrorNamingIt) {
  outbox::testing::TempDir dir;
  ArchiveFile archive(dir.File("missing/archive.jsonl"), 1000);
  try {
    archive.Append({Delivered(1, "p")}, "db1");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing/archive.jsonl"), std::string::npos);
  }
}

}  // namespace
}  // namespace outbox::agent
