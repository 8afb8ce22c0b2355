// Message ids and Standard Webhooks signatures, made and verified. All
// hashing, HMAC and base64 is OpenSSL's.
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "internal.h"
#include "outbox/transport.h"
#include "util/base64.h"
#include "util/message_id.h"

namespace outbox::transport {
namespace {

constexpr std::string_view kWebhookSecretPrefix = "whsec_";
// Standard Webhooks: "secrets ... between 24 bytes and 64 bytes".
constexpr std::size_t kMinWebhookKeyBytes = 24;
constexpr std::size_t kMaxWebhookKeyBytes = 64;

// OpenSSL failing to hash is a broken environment, not bad input.
void CheckOpenSsl(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("OpenSSL ") + what + " failed");
}

// "id.timestamp.body", what Standard Webhooks signs.
std::string SignedContent(std::string_view id, std::string_view timestamp, std::string_view body) {
  std::string content;
  content.reserve(id.size() + timestamp.size() + body.size() + 2);
  content.append(id).append(".").append(timestamp).append(".").append(body);
  return content;
}

std::string HmacSha256Base64(std::string_view key, std::string_view content) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int mac_size = 0;
  CheckOpenSsl(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                    reinterpret_cast<const unsigned char*>(content.data()), content.size(),
                    mac.data(), &mac_size) != nullptr,
               "HMAC-SHA256");
  return util::Base64Encode(
      std::string_view(reinterpret_cast<const char*>(mac.data()), mac_size));
}

}  // namespace

namespace internal {

std::string DecodeWebhookSecret(std::string_view secret, std::string_view field) {
  const auto fail = [&](std::string_view why) {
    throw OptionError(std::string(field), std::string(why));
  };
  if (!secret.starts_with(kWebhookSecretPrefix)) {
    fail("must have the form whsec_<base64>");
  }
  std::optional<std::string> key = util::Base64Decode(secret.substr(kWebhookSecretPrefix.size()));
  if (!key) fail("the part after whsec_ is not valid base64");
  if (key->size() < kMinWebhookKeyBytes || key->size() > kMaxWebhookKeyBytes) {
    fail("must decode to 24..64 bytes, not " + std::to_string(key->size()));
  }
  return *std::move(key);
}

}  // namespace internal

// One implementation, in util/, so that outboxctl (which links no transport)
// computes the same keys when it reconciles with a receiver.
std::string MessageId(std::string_view database_id, std::string_view topic, std::string_view key) {
  return util::MessageId(database_id, topic, key);
}

std::string BatchId(std::span<const Message> messages) {
  std::vector<std::string_view> ids;
  ids.reserve(messages.size());
  for (const Message& message : messages) ids.push_back(message.message_id);
  return util::LengthPrefixedSha256Hex(ids);
}

std::string WebhookSignature(std::span<const std::string> secrets, std::string_view id,
                             std::int64_t timestamp_s, std::string_view body) {
  const std::string signed_content = SignedContent(id, std::to_string(timestamp_s), body);
  std::string header;
  for (std::size_t i = 0; i < secrets.size(); ++i) {
    const std::string key =
        internal::DecodeWebhookSecret(secrets[i], "signing_secrets[" + std::to_string(i) + "]");
    if (!header.empty()) header += ' ';
    header += "v1,";
    header += HmacSha256Base64(key, signed_content);
  }
  return header;
}

std::string_view SignatureCheckName(SignatureCheck check) {
  switch (check) {
    case SignatureCheck::kValid:
      return "valid";
    case SignatureCheck::kMissing:
      return "missing";
    case SignatureCheck::kBadTimestamp:
      return "bad_timestamp";
    case SignatureCheck::kTooOld:
      return "too_old";
    case SignatureCheck::kTooNew:
      return "too_new";
    case SignatureCheck::kMismatch:
      return "mismatch";
  }
  return "unknown";
}

SignatureCheck VerifyWebhookSignature(std::span<const std::string> secrets, std::string_view id,
                                      std::string_view timestamp, std::string_view body,
                                      std::string_view signature_header, std::int64_t now_s,
                                      std::int64_t tolerance_s) {
  // Configuration first, so that a bad secret fails at the first request
  // whatever that request holds.
  if (secrets.empty()) {
    throw std::invalid_argument("signing_secrets: at least one secret is needed to verify");
  }
  if (tolerance_s < 0) throw std::invalid_argument("tolerance_s: must not be negative");
  std::vector<std::string> keys;
  keys.reserve(secrets.size());
  for (std::size_t i = 0; i < secrets.size(); ++i) {
    keys.push_back(
        internal::DecodeWebhookSecret(secrets[i], "signing_secrets[" + std::to_string(i) + "]"));
  }

  if (id.empty() || timestamp.empty() || signature_header.empty()) return SignatureCheck::kMissing;
  std::int64_t sent_s = 0;
  const auto [end, error] =
      std::from_chars(timestamp.data(), timestamp.data() + timestamp.size(), sent_s);
  if (error != std::errc() || end != timestamp.data() + timestamp.size() || sent_s < 0) {
    return SignatureCheck::kBadTimestamp;
  }
  // The tolerance bounds replays of a captured request; compared without
  // subtracting the two, which a hostile timestamp could overflow.
  if (sent_s < now_s && now_s - sent_s > tolerance_s) return SignatureCheck::kTooOld;
  if (sent_s > now_s && sent_s - now_s > tolerance_s) return SignatureCheck::kTooNew;

  // The header's timestamp text is what was signed (Standard Webhooks).
  const std::string signed_content = SignedContent(id, timestamp, body);
  std::vector<std::string> expected;
  expected.reserve(keys.size());
  for (const std::string& key : keys) expected.push_back(HmacSha256Base64(key, signed_content));

  bool matched = false;
  std::size_t start = 0;
  while (start <= signature_header.size()) {
    const std::size_t space = std::min(signature_header.find(' ', start), signature_header.size());
    const std::string_view entry = signature_header.substr(start, space - start);
    start = space + 1;
    if (!entry.starts_with("v1,")) continue;  // other schemes (v1a, ...) are not ours
    const std::string_view signature = entry.substr(3);
    for (const std::string& candidate : expected) {
      // Constant time: how much of a forged signature matched must not show.
      if (candidate.size() == signature.size() &&
          CRYPTO_memcmp(candidate.data(), signature.data(), signature.size()) == 0) {
        matched = true;
      }
    }
  }
  return matched ? SignatureCheck::kValid : SignatureCheck::kMismatch;
}

}  // namespace outbox::transport
