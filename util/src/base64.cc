#include "util/base64.h"

#include <openssl/evp.h>

#include <limits>
#include <stdexcept>

namespace outbox::util {

std::string Base64Encode(std::string_view bytes) {
  // EVP_EncodeBlock takes an int length.
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max() / 4 * 3)) {
    throw std::length_error("base64: input too large");
  }
  std::string text(4 * ((bytes.size() + 2) / 3), '\0');
  const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(text.data()),
                                      reinterpret_cast<const unsigned char*>(bytes.data()),
                                      static_cast<int>(bytes.size()));
  text.resize(static_cast<std::size_t>(written));
  return text;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  // EVP_DecodeBlock skips surrounding whitespace and does not report padding,
  // so check the exact form here.
  if (text.empty() || text.size() % 4 != 0 ||
      text.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    return std::nullopt;
  }
  std::size_t padding = 0;
  while (padding < 2 && text[text.size() - 1 - padding] == '=') ++padding;
  for (std::size_t i = 0; i < text.size() - padding; ++i) {
    const char c = text[i];
    const bool in_alphabet = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                             (c >= '0' && c <= '9') || c == '+' || c == '/';
    if (!in_alphabet) return std::nullopt;
  }
  std::string bytes(text.size() / 4 * 3, '\0');
  const int decoded = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(bytes.data()),
                                      reinterpret_cast<const unsigned char*>(text.data()),
                                      static_cast<int>(text.size()));
  if (decoded < 0) return std::nullopt;
  bytes.resize(static_cast<std::size_t>(decoded) - padding);
  return bytes;
}

}  // namespace outbox::util
