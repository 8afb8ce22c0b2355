#include "http_head.h"

#include <algorithm>
#include <cctype>

namespace outbox::util::http {
namespace {

// RFC 9110 token characters (method and header names).
bool IsTokenChar(char c) {
  static constexpr std::string_view kSpecials = "!#$%&'*+-.^_`|~";
  return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
         kSpecials.find(c) != std::string_view::npos;
}

bool IsToken(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), IsTokenChar);
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

HeadParse Refuse(int status, std::string problem) {
  HeadParse parse;
  parse.status = status;
  parse.problem = std::move(problem);
  return parse;
}

// "GET /path?q HTTP/1.1" into `head`; false if it is not one.
bool ParseRequestLine(std::string_view line, RequestHead& head, HeadParse& refusal) {
  const std::size_t first = line.find(' ');
  const std::size_t last = line.rfind(' ');
  if (first == std::string_view::npos || first == last) {
    refusal = Refuse(400, "malformed request line");
    return false;
  }
  const std::string_view method = line.substr(0, first);
  const std::string_view target = line.substr(first + 1, last - first - 1);
  const std::string_view version = line.substr(last + 1);
  if (!IsToken(method) || target.empty() || target.front() != '/' ||
      target.find_first_of(" \t") != std::string_view::npos) {
    refusal = Refuse(400, "malformed request line");
    return false;
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    refusal = Refuse(version.substr(0, 5) == "HTTP/" ? 505 : 400, "unsupported HTTP version");
    return false;
  }
  head.method = method;
  const std::size_t question = target.find('?');
  head.path = target.substr(0, question);
  if (question != std::string_view::npos) head.query = target.substr(question + 1);
  head.minor_version = version.back() - '0';
  return true;
}

}  // namespace

HeadParse ParseRequestHead(std::string_view buffer, std::size_t max_header_bytes,
                           std::size_t max_header_count) {
  // Blank lines before a request are tolerated (RFC 9112, 2.2).
  std::size_t start = 0;
  while (buffer.substr(start, 2) == "\r\n") start += 2;
  const std::size_t end = buffer.find("\r\n\r\n", start);
  if (end == std::string_view::npos || end + 4 > max_header_bytes) {
    if (buffer.size() >= max_header_bytes || end != std::string_view::npos) {
      return Refuse(431, "request head over " + std::to_string(max_header_bytes) + " bytes");
    }
    return {};
  }
  std::string_view rest = buffer.substr(start, end + 2 - start);  // each line ends "\r\n"
  HeadParse parse;
  RequestHead head;
  std::size_t eol = rest.find("\r\n");
  if (!ParseRequestLine(rest.substr(0, eol), head, parse)) return parse;
  rest.remove_prefix(eol + 2);
  while (!rest.empty()) {
    eol = rest.find("\r\n");
    const std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol + 2);
    if (head.headers.size() == max_header_count) {
      return Refuse(431, "more than " + std::to_string(max_header_count) + " headers");
    }
    const std::size_t colon = line.find(':');
    // No obsolete line folding, no blank before the colon (RFC 9112, 5).
    if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
      return Refuse(400, "malformed header line");
    }
    std::string name(line.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const std::string_view value = Trim(line.substr(colon + 1));
    if (value.find_first_of("\r\n") != std::string_view::npos ||
        value.find('\0') != std::string_view::npos) {
      return Refuse(400, "malformed header value");
    }
    head.headers.emplace_back(std::move(name), std::string(value));
  }
  parse.head = std::move(head);
  parse.consumed = end + 4;
  return parse;
}

ChunkedParse DecodeChunked(std::string_view buffer, std::size_t max_body_bytes) {
  ChunkedParse parse;
  std::size_t at = 0;
  const auto fail = [&parse](ChunkedParse::State state) {
    parse.state = state;
    parse.body.clear();
    return parse;
  };
  for (;;) {
    const std::size_t eol = buffer.find("\r\n", at);
    if (eol == std::string_view::npos) {
      return buffer.size() - at > 1024 ? fail(ChunkedParse::State::kMalformed) : parse;
    }
    std::string_view size_text = buffer.substr(at, eol - at);
    size_text = size_text.substr(0, size_text.find(';'));  // chunk extensions are ignored
    size_text = Trim(size_text);
    if (size_text.empty() || size_text.size() > 8 ||
        size_text.find_first_not_of("0123456789abcdefABCDEF") != std::string_view::npos) {
      return fail(ChunkedParse::State::kMalformed);
    }
    const std::size_t size = std::stoul(std::string(size_text), nullptr, 16);
    if (parse.body.size() + size > max_body_bytes) return fail(ChunkedParse::State::kTooLarge);
    at = eol + 2;
    if (size == 0) {
      // Trailers (ignored) up to a blank line.
      for (;;) {
        const std::size_t line_end = buffer.find("\r\n", at);
        if (line_end == std::string_view::npos) {
          parse.body.clear();
          return parse;
        }
        const bool blank = line_end == at;
        at = line_end + 2;
        if (blank) break;
      }
      parse.state = ChunkedParse::State::kComplete;
      parse.consumed = at;
      return parse;
    }
    if (buffer.size() < at + size + 2) {
      parse.body.clear();
      return parse;  // incomplete
    }
    if (buffer.substr(at + size, 2) != "\r\n") return fail(ChunkedParse::State::kMalformed);
    parse.body.append(buffer.substr(at, size));
    at += size + 2;
  }
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "";
  }
}

}  // namespace outbox::util::http
