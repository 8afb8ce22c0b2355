// Parsing of an HTTP/1.x request head and of a chunked body, for the
// server in http_server.cc. Pure functions over bytes already received;
// thread-safe. Internal to outbox_util.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace outbox::util::http {

struct RequestHead {
  std::string method;
  std::string path;
  std::string query;
  int minor_version = 1;                                     // HTTP/1.<minor>
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
};

struct HeadParse {
  // 0 with `head` set: complete; 0 without: more bytes needed; else the
  // status to answer (400, 431, 505) before closing.
  int status = 0;
  std::optional<RequestHead> head;
  std::size_t consumed = 0;  // bytes of the head, its blank line included
  std::string problem;       // why, for a refusal (no request data in it)
};

// Parses the head at the start of `buffer` within the limits. Only
// origin-form targets ("/path?query") are accepted.
HeadParse ParseRequestHead(std::string_view buffer, std::size_t max_header_bytes,
                           std::size_t max_header_count);

struct ChunkedParse {
  enum class State { kIncomplete, kComplete, kMalformed, kTooLarge } state = State::kIncomplete;
  std::string body;
  std::size_t consumed = 0;  // bytes of the chunked encoding, trailers included
};

// Decodes a chunked body at the start of `buffer`, refusing one whose
// decoded size would pass `max_body_bytes` as soon as a chunk size says so.
ChunkedParse DecodeChunked(std::string_view buffer, std::size_t max_body_bytes);

// "Not Found" for 404 and so on ("" for codes it does not know).
std::string_view ReasonPhrase(int status);

}  // namespace outbox::util::http
