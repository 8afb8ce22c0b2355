#include "archive.h"

#include <fcntl.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cereal/external/base64.hpp>
#include <cerrno>
#include <filesystem>
#include <stdexcept>

#include "outbox/transport.h"

namespace outbox::agent {
namespace {

void PutString(rapidjson::Writer<rapidjson::StringBuffer>& json, const std::string& text) {
  json.String(text.c_str(), static_cast<rapidjson::SizeType>(text.size()));
}

// Writes all of `data`, retrying short writes and EINTR.
bool WriteAll(int fd, const char* data, std::size_t left) {
  while (left > 0) {
    const ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

std::string ArchiveLine(const store::Row& row, const std::string& database_id) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> json(buffer);
  json.StartObject();
  json.Key("id");
  json.Int64(row.id);
  json.Key("topic");
  PutString(json, row.topic);
  json.Key("msg_key");
  PutString(json, row.key);
  json.Key("message_id");
  PutString(json, transport::MessageId(database_id, row.topic, row.key));
  json.Key("payload_base64");
  PutString(json, cereal::base64::encode(reinterpret_cast<const unsigned char*>(row.payload.data()),
                                         row.payload.size()));
  if (row.headers_json) {
    json.Key("headers");
    PutString(json, *row.headers_json);
  }
  json.Key("attempts");
  json.Int(row.attempts);
  json.Key("created_at");
  json.Int64(row.created_at);
  json.Key("delivered_at");
  json.Int64(row.updated_at);
  json.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

void ArchiveFile::Append(const std::vector<store::Row>& rows, const std::string& database_id) {
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && st.st_size >= max_bytes_) {
    std::filesystem::rename(path_, path_ + ".1");  // keep one previous file
  }
  std::string text;
  for (const auto& row : rows) {
    text += ArchiveLine(row, database_id);
    text += '\n';
  }
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) throw std::runtime_error("retention.archive_path: cannot open " + path_);
  const bool ok = WriteAll(fd, text.data(), text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("retention.archive_path: cannot write " + path_);
}

}  // namespace outbox::agent
