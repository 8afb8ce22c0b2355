// Splits a fuzzer's bytes into typed fields, the same way under libFuzzer
// and in the corpus replay: a string field is a 2-byte little-endian length
// and that many bytes (fewer if the input ends), an integer is 8 bytes
// little-endian (zero-padded at the end). Header-only; no dependencies, so
// that g++ builds it too (clang's FuzzedDataProvider is clang-only).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace outbox::fuzz {

class FuzzInput {
 public:
  FuzzInput(const std::uint8_t* data, std::size_t size)
      : text_(reinterpret_cast<const char*>(data), size) {}

  std::string_view Field() {
    const std::size_t length = static_cast<std::size_t>(Byte()) |
                               (static_cast<std::size_t>(Byte()) << 8);
    const std::string_view field = text_.substr(0, length);
    text_.remove_prefix(field.size());
    return field;
  }
  std::int64_t Integer() {
    std::uint64_t value = 0;
    for (int i = 0; i < 8; ++i) value |= static_cast<std::uint64_t>(Byte()) << (8 * i);
    return static_cast<std::int64_t>(value);
  }
  std::uint8_t Byte() {
    if (text_.empty()) return 0;
    const auto byte = static_cast<std::uint8_t>(text_.front());
    text_.remove_prefix(1);
    return byte;
  }
  // Whatever is left, as one field.
  std::string_view Rest() {
    const std::string_view rest = text_;
    text_ = {};
    return rest;
  }

 private:
  std::string_view text_;
};

// A broken invariant: print it and abort, which libFuzzer reports as a crash
// and the corpus replay as a failed test.
[[noreturn]] inline void Violated(const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: invariant violated: %s\n", file, line, what);
  std::abort();
}

}  // namespace outbox::fuzz

#define FUZZ_CHECK(condition)                                                  \
  do {                                                                         \
    if (!(condition)) ::outbox::fuzz::Violated(#condition, __FILE__, __LINE__); \
  } while (false)
