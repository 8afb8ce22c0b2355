// compression_bench: bytes on the wire per message for 100-message NDJSON
// batches of realistic order events, sent through Endpoint with
// "compression": "gzip" and with "none" to a local null HTTP server, and the
// time gzip adds per batch. Deterministic (a fixed seed), so one run is the
// figure. Prints a table, and "@row" lines for packaging/bench.sh.
//
//   compression_bench [batches=50]
//
// Not a ctest test.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/null_http_server.h"
#include "outbox/transport.h"

namespace {

namespace transport = outbox::transport;
using SteadyClock = std::chrono::steady_clock;

constexpr std::size_t kBatch = 100;
constexpr double kTargetRatio = 4.0;

// An order event as a shop would emit it: random ids, amounts, times and
// postcodes (which compress poorly), field names and vocabulary (which
// compress well) repeated from message to message.
std::string OrderEvent(std::mt19937_64& random, int n) {
  static const char* const kNames[] = {"Ana Souza", "Jonas Weber", "Mei Tanaka", "Luca Rossi",
                                       "Sara Nilsson", "Omar Haddad", "Chloé Martin",
                                       "Piotr Nowak"};
  static const char* const kProducts[] = {"USB-C cable 2 m", "Espresso beans 1 kg",
                                          "Running socks (3 pairs)", "LED bulb E27 9 W",
                                          "Notebook A5 dotted", "Phone case, black",
                                          "Water bottle 750 ml", "AA batteries (8)"};
  static const char* const kCountries[] = {"DE", "FR", "NL", "PL", "SE", "IT", "ES", "AT"};
  const auto pick = [&](std::uint64_t count) { return random() % count; };
  // An index below `count` (at most 8 here), as a size_t on 32-bit too.
  const auto pick_index = [&](std::size_t count) { return static_cast<std::size_t>(pick(count)); };
  char uuid[40];
  std::snprintf(uuid, sizeof uuid, "%08llx-%04llx-4%03llx-a%03llx-%012llx",
                static_cast<unsigned long long>(pick(1ULL << 32)),
                static_cast<unsigned long long>(pick(1 << 16)),
                static_cast<unsigned long long>(pick(1 << 12)),
                static_cast<unsigned long long>(pick(1 << 12)),
                static_cast<unsigned long long>(pick(1ULL << 48)));
  const std::size_t customer = pick_index(8);
  std::string json = std::string(R"({"order_id":")") + uuid + R"(","number":)" +
                     std::to_string(100000 + n) + R"(,"customer":{"id":"c-)" +
                     std::to_string(pick(900000) + 100000) + R"(","name":")" + kNames[customer] +
                     R"(","email":"customer)" + std::to_string(pick(100000)) +
                     R"(@example.com"},"created_at":"2026-12-01T14:)" +
                     std::to_string(10 + pick(50)) + ":" + std::to_string(10 + pick(50)) + "." +
                     std::to_string(100 + pick(900)) +
                     R"(Z","status":"created","currency":"EUR","items":[)";
  std::uint64_t total = 0;
  const std::size_t items = 1 + pick_index(4);
  for (std::size_t i = 0; i < items; ++i) {
    const std::size_t product = pick_index(8);
    const std::uint64_t qty = 1 + pick(3);
    const std::uint64_t price = 199 + pick(5000);
    total += qty * price;
    if (i > 0) json += ',';
    json += R"({"sku":"SKU-)" + std::to_string(10000 + product * 37) + R"(","name":")" +
            kProducts[product] + R"(","qty":)" + std::to_string(qty) + R"(,"unit_price_cents":)" +
            std::to_string(price) + "}";
  }
  json += R"(],"total_cents":)" + std::to_string(total) + R"(,"shipping":{"method":")" +
          (pick(3) == 0 ? "express" : "standard") + R"(","country":")" + kCountries[pick(8)] +
          R"(","postcode":")" + std::to_string(10000 + pick(89999)) + R"("}})";
  return json;
}

struct Totals {
  std::size_t wire_bytes = 0;
  std::size_t messages = 0;
  double seconds = 0;
};

Totals Send(const std::string& url, transport::Compression compression, int batches) {
  transport::EndpointOptions options;
  options.url = url;
  options.ce_source = "urn:bench";
  options.batch.max_messages = kBatch;
  options.compression = compression;
  transport::Endpoint endpoint(options);
  std::mt19937_64 random(20261201);  // the same events for both sides
  Totals totals;
  for (int b = 0; b < batches; ++b) {
    std::vector<std::string> payloads;
    std::vector<std::string> ids;
    for (std::size_t i = 0; i < kBatch; ++i) {
      const int n = b * static_cast<int>(kBatch) + static_cast<int>(i);
      payloads.push_back(OrderEvent(random, n));
      ids.push_back(transport::MessageId("bench-db", "order.created", std::to_string(n)));
    }
    std::vector<transport::Message> messages;
    for (std::size_t i = 0; i < kBatch; ++i) {
      messages.push_back({.message_id = ids[i],
                          .topic = "order.created",
                          .payload = payloads[i],
                          .created_at_ms = 1'764'598'000'000 + static_cast<std::int64_t>(i)});
    }
    const auto start = SteadyClock::now();
    const transport::Result result = endpoint.PushBatch(messages);
    totals.seconds += std::chrono::duration<double>(SteadyClock::now() - start).count();
    if (result.outcome != transport::Outcome::kDelivered) {
      throw std::runtime_error("a batch failed: " + result.error);
    }
    totals.wire_bytes += result.request_bytes;
    totals.messages += kBatch;
  }
  return totals;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int batches = argc > 1 ? std::atoi(argv[1]) : 50;
    if (batches <= 0) throw std::invalid_argument("usage: compression_bench [batches]");
    outbox::testing::NullHttpServer server;
    const Totals plain = Send(server.Url(), transport::Compression::kNone, batches);
    const Totals gzip = Send(server.Url(), transport::Compression::kGzip, batches);
    const auto per_message = [](const Totals& totals) {
      return static_cast<double>(totals.wire_bytes) / static_cast<double>(totals.messages);
    };
    const double plain_per = per_message(plain);
    const double gzip_per = per_message(gzip);
    const double ratio = plain_per / gzip_per;
    const double plain_ms = plain.seconds * 1000 / batches;
    const double gzip_ms = gzip.seconds * 1000 / batches;
    std::fprintf(stderr,
                 "compression_bench: %d NDJSON batches of %zu order events\n"
                 "  body bytes per message: none %.1f, gzip %.1f (%.2fx smaller)\n"
                 "  ms per batch (build, compress, POST on loopback): none %.2f, gzip %.2f\n",
                 batches, kBatch, plain_per, gzip_per, ratio, plain_ms, gzip_ms);
    std::printf(
        "@row\t10 gzip: body bytes per message, 100-message NDJSON batches\t%.0f B\t%.0f B\t"
        "%.2f\t>= %.0fx smaller\t%s\n",
        gzip_per, plain_per, ratio, kTargetRatio, ratio >= kTargetRatio ? "yes" : "NO");
    std::printf(
        "@row\t10 gzip: ms per 100-message batch (loopback)\t%.2f ms\t%.2f ms\t%.2f\t-\t-\n",
        gzip_ms, plain_ms, gzip_ms / plain_ms);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "compression_bench: %s\n", error.what());
    return 1;
  }
}
