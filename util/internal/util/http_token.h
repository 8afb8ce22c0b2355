// The RFC 9110 token (section 5.6.2): what HTTP header names are, and what a
// row's schema_version may hold (the insert trigger checks the same set).
#pragma once

#include <string_view>

namespace outbox::util {

// The characters a token is made of: ASCII letters and digits and
// !#$%&'*+-.^_`|~ (a description for error messages).
inline constexpr std::string_view kHttpTokenCharacters = "letters, digits, !#$%&'*+-.^_`|~";

// True when `text` is one or more token characters.
bool IsHttpToken(std::string_view text);

}  // namespace outbox::util
