// UTF-8 checks for text that other applications wrote (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF, no sequence cut short).
// Internal to edge-outbox; pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace outbox::util {

// Bytes of the valid UTF-8 sequence that starts at `at` (1..4), or 0 if there
// is none there. `at` must be < text.size().
std::size_t Utf8SequenceAt(std::string_view text, std::size_t at);

// True when the whole of `text` is well-formed UTF-8.
bool IsValidUtf8(std::string_view text);

// `text` with every byte that is not part of a valid sequence replaced by
// U+FFFD, so that it can go into JSON or a log line.
std::string ToValidUtf8(std::string_view text);

// The longest prefix of `text` of at most `limit` bytes that does not end
// inside a UTF-8 sequence (in text that is not UTF-8, it backs up at most 3
// bytes).
std::string_view TruncateUtf8(std::string_view text, std::size_t limit);

}  // namespace outbox::util
