// What an HTTP status says about our own configuration, shared by the
// transport's classification and the agent's outcome rules.
#pragma once

namespace outbox::util {

// 401, 403, 404, 407: our credentials, the URL or the proxy are wrong, and
// every message would fail the same way until the configuration changes (the
// breaker opens at once).
constexpr bool IsConfigurationFailureStatus(long status) {
  return status == 401 || status == 403 || status == 404 || status == 407;
}

}  // namespace outbox::util
