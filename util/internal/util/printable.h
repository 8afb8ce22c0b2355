// Text that other applications wrote (topics, keys, headers, errors), made
// safe for a terminal or a text log line. Internal to edge-outbox; pure
// functions, thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace outbox::util {

// `text` with every control character escaped, so that it can neither start
// a new line (a forged "status: delivered" line) nor send a terminal escape
// sequence: C0 controls and DEL as \xNN, C1 controls (U+0080..U+009F) as
// \u00NN, bytes that are not UTF-8 as \xNN. Everything else, backslashes
// included, is copied as it is.
std::string EscapeControls(std::string_view text);

// Appends EscapeControls(text) to `out`.
void AppendEscapedControls(std::string_view text, std::string& out);

}  // namespace outbox::util
