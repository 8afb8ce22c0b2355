// Fuzz target: outboxd's configuration file (agent::ParseConfig). A config
// is either refused with one line that starts with the key path (and never
// quotes a secret), or accepted as options that validate. Secrets come from
// env:OUTBOX_FUZZ_SECRET; its value must appear in no error and no warning.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "fuzz_input.h"
#include "outbox/agent.h"

namespace {
constexpr char kSecret[] = "s3cr3t-fuzz-token-0123456789";
}

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  ::setenv("OUTBOX_FUZZ_SECRET", kSecret, 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace outbox;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // "file:PATH" secrets read files: only inline values and the one
  // environment variable are fuzzed (the hostile-config table covers files).
  if (text.find("file:") != std::string_view::npos) return 0;
  // Only a value resolved from env: must stay hidden; text the file itself
  // holds (a header name, say) may be quoted back.
  const bool secret_in_file = text.find(kSecret) != std::string_view::npos;
  try {
    const agent::Config config = agent::ParseConfig(text);
    agent::Validate(config.options);  // ParseConfig promises validated options
    for (const std::string& warning : config.warnings) {
      FUZZ_CHECK(secret_in_file || warning.find(kSecret) == std::string::npos);
    }
  } catch (const std::invalid_argument& e) {
    const std::string_view what = e.what();
    FUZZ_CHECK(!what.empty());
    FUZZ_CHECK(what.find('\n') == std::string_view::npos);
    FUZZ_CHECK(secret_in_file || what.find(kSecret) == std::string_view::npos);
    FUZZ_CHECK(what.find(": ") != std::string_view::npos);  // "<key path>: <reason>"
  }
  return 0;
}
