#include "archive.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../common/temp_dir.h"
#include "outbox/transport.h"
#include "row_json.h"

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

// The lines of a gzip file, read back through zlib.
std::vector<std::string> GzipLines(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  EXPECT_NE(file, nullptr) << path;
  std::string text;
  char buffer[4096];
  for (int n; file != nullptr && (n = gzread(file, buffer, sizeof buffer)) > 0;) {
    text.append(buffer, static_cast<std::size_t>(n));
  }
  if (file != nullptr) gzclose(file);
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(ArchiveFile, AppendsOneLinePerRowAndRotatesAtTheLimitIntoGzip) {
  outbox::testing::TempDir dir;
  const std::string path = dir.File("archive.jsonl");
  ArchiveFile archive(path, 10);
  archive.Append({Delivered(1, "p"), Delivered(2, "p")}, "db1");
  EXPECT_EQ(Lines(path).size(), 2u);
  archive.Append({Delivered(3, "p")}, "db1");  // the file is over 10 bytes: rotated first
  EXPECT_EQ(GzipLines(path + ".1.gz").size(), 2u);
  ASSERT_EQ(Lines(path).size(), 1u);
  EXPECT_NE(Lines(path)[0].find("\"id\":3"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path + ".1"));
}

TEST(ArchiveFile, RotationKeepsTheNewestArchivesWithoutLosingAny) {
  outbox::testing::TempDir dir;
  const std::string path = dir.File("archive.jsonl");
  ArchiveFile archive(path, 1, /*keep=*/3);
  for (int id = 1; id <= 5; ++id) archive.Append({Delivered(id, "p")}, "db1");
  // Row 5 is current; rows 4, 3, 2 rotated (newest first); row 1 dropped
  // because only 3 rotated files are kept.
  ASSERT_EQ(Lines(path).size(), 1u);
  for (int i = 1; i <= 3; ++i) {
    const std::vector<std::string> lines = GzipLines(RotatedArchivePath(path, i));
    ASSERT_EQ(lines.size(), 1u) << i;
    EXPECT_NE(lines[0].find("\"id\":" + std::to_string(5 - i)), std::string::npos) << lines[0];
  }
  EXPECT_FALSE(std::filesystem::exists(RotatedArchivePath(path, 4)));
}

TEST(ArchiveLine, HostileRowsAreValidUtf8AndComeBackByteForByte) {
  store::Row row = Delivered(9, std::string("\xff\x00" "bin\xc3", 6));
  row.topic = std::string("t\xe9\x80", 3);  // a cut UTF-8 sequence
  row.key = std::string("k\xff\"\n", 4);
  row.headers_json = std::string("{\"x\":\"\xfe\"}", 9);
  const std::string line = ArchiveLine(row, "db1");
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseValidateEncodingFlag>(line.c_str());
  ASSERT_FALSE(doc.HasParseError()) << line;  // valid JSON and valid UTF-8
  EXPECT_TRUE(doc.HasMember("topic_base64"));
  EXPECT_FALSE(ArchiveLine(Delivered(1, "p"), "db1").find("topic_base64") != std::string::npos);
  const row_json::ArchivedMessage back = row_json::ParseArchiveLine(line);
  EXPECT_EQ(back.topic, row.topic);
  EXPECT_EQ(back.key, row.key);
  EXPECT_EQ(back.payload, row.payload);
  EXPECT_EQ(back.headers_json, row.headers_json);
}

TEST(ArchiveLine, ParseRefusesDamagedLines) {
  EXPECT_THROW(row_json::ParseArchiveLine("{"), std::invalid_argument);
  EXPECT_THROW(row_json::ParseArchiveLine(R"({"topic":"t"})"), std::invalid_argument);
  EXPECT_THROW(row_json::ParseArchiveLine(R"({"topic":"t","msg_key":"k","payload_base64":"@@"})"),
               std::invalid_argument);
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
