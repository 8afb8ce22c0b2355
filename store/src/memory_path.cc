// In-memory database paths (outbox/store.h).
#include <stdexcept>
#include <string>
#include <string_view>

#include "outbox/store.h"

namespace outbox::store {
namespace {

constexpr std::size_t kMaxNameChars = 128;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

}  // namespace

std::string SharedMemoryPath(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameChars) {
    throw std::invalid_argument("name: expected 1 to 128 characters");
  }
  for (const char c : name) {
    if (!IsNameChar(c)) {
      throw std::invalid_argument("name: only letters, digits, '.', '_' and '-' are allowed");
    }
  }
  // The leading "/" is what makes SQLite's memdb VFS share the database
  // between the connections of the process (https://sqlite.org/src/file/src/memdb.c).
  return "file:/" + std::string(name) + "?vfs=memdb";
}

bool IsSharedMemoryPath(std::string_view path) {
  return path.starts_with("file:/") && path.find("vfs=memdb") != std::string_view::npos;
}

bool IsInMemoryPath(std::string_view path) {
  return path.empty() || path == ":memory:" || path.starts_with("file::memory:") ||
         IsSharedMemoryPath(path);
}

}  // namespace outbox::store
