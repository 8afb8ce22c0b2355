#include "util/message_id.h"

#include <openssl/evp.h>

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>

namespace outbox::util {
namespace {

struct FreeContext {
  void operator()(EVP_MD_CTX* context) const { EVP_MD_CTX_free(context); }
};

struct FreeDigest {
  void operator()(EVP_MD* digest) const { EVP_MD_free(digest); }
};

void Check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("message id: OpenSSL ") + what + " failed");
}

// SHA-256 fetched from the default provider once: EVP_sha256() in a digest
// init makes OpenSSL 3 look the implementation up again on every call (a
// locked provider query), which a message id per send paid each time.
const EVP_MD* Sha256() {
  static const std::unique_ptr<EVP_MD, FreeDigest> digest(EVP_MD_fetch(nullptr, "SHA256", nullptr));
  Check(digest != nullptr, "SHA-256 fetch");
  return digest.get();
}

}  // namespace

std::string MessageId(std::string_view database_id, std::string_view topic, std::string_view key) {
  const std::string_view fields[] = {database_id, topic, key};
  return LengthPrefixedSha256Hex(fields);
}

std::string LengthPrefixedSha256Hex(std::span<const std::string_view> fields) {
  // One context per thread, reset by each init: no allocation per id.
  thread_local const std::unique_ptr<EVP_MD_CTX, FreeContext> context(EVP_MD_CTX_new());
  Check(context != nullptr && EVP_DigestInit_ex2(context.get(), Sha256(), nullptr) == 1,
        "SHA-256 init");
  for (std::string_view field : fields) {
    std::array<unsigned char, 8> length{};
    std::uint64_t size = field.size();
    for (int i = 7; i >= 0; --i) {
      length[static_cast<std::size_t>(i)] = static_cast<unsigned char>(size);
      size >>= 8;
    }
    Check(EVP_DigestUpdate(context.get(), length.data(), length.size()) == 1 &&
              EVP_DigestUpdate(context.get(), field.data(), field.size()) == 1,
          "SHA-256 update");
  }
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  Check(EVP_DigestFinal_ex(context.get(), digest.data(), &size) == 1, "SHA-256 final");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(size * 2, '\0');
  for (unsigned int i = 0; i < size; ++i) {
    hex[2 * i] = kHex[digest[i] >> 4];
    hex[2 * i + 1] = kHex[digest[i] & 0x0f];
  }
  return hex;
}

}  // namespace outbox::util
