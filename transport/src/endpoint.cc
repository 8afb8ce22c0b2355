// Endpoint: libcurl transfers over a pool of kept-alive connections.
//
// Each pooled connection is an easy handle driven by a multi handle of its
// own (curl_multi_perform + curl_multi_poll) rather than curl_easy_perform:
// curl_multi_wakeup lets AbortAll interrupt a transfer at once, where
// curl_easy_perform could only be stopped from its progress callback, which
// libcurl may call as rarely as once a second. transport_bench measures the
// cost of this against a plain curl_easy_perform loop.
#include <curl/curl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "curl_url.h"
#include "internal.h"
#include "outbox/transport.h"
#include "util/clock.h"
#include "util/utf8.h"

namespace outbox::transport {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Longest single wait in curl_multi_poll; libcurl shortens it to its own next
// timer (timeouts), and AbortAll's wakeup ends it early.
constexpr int kPollTimeoutMs = 1000;

// Configured values shorter than this are not redacted from errors: they are
// too short to be secrets and would blank out ordinary words.
constexpr std::size_t kMinRedactedBytes = 8;

constexpr std::string_view kRedacted = "[redacted]";

struct EasyDeleter {
  void operator()(CURL* easy) const { curl_easy_cleanup(easy); }
};
struct MultiDeleter {
  void operator()(CURLM* multi) const { curl_multi_cleanup(multi); }
};
// A response body as one line of text: control bytes become spaces.
std::string OneLine(std::string_view body) {
  std::string text(body);
  for (char& c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) c = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

void ReplaceAll(std::string& text, std::string_view what, std::string_view with) {
  for (std::size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + with.size())) {
    text.replace(at, what.size(), with);
  }
}

// A kept-alive connection: one easy handle and the multi handle driving it.
// Owned by the pool; used by one call at a time.
struct Connection {
  // The endpoint's URL parsed once (CURLOPT_CURLU): given only the string,
  // libcurl parses it again for every request. Declared first so that it
  // outlives the easy handle reading it.
  internal::CurlUrlPtr url;
  std::unique_ptr<CURL, EasyDeleter> easy;
  std::unique_ptr<CURLM, MultiDeleter> multi;
  // The start of the current response body, up to the configured cap.
  std::string body_excerpt;
  std::size_t excerpt_cap = 0;
  std::array<char, CURL_ERROR_SIZE> error{};
  // The current request's header lines and the list libcurl reads them
  // through, both reused from request to request: building the list costs
  // no allocation once the lines have grown to their usual length.
  std::vector<std::string> header_lines;
  std::vector<curl_slist> header_nodes;
};

constexpr std::string_view kUserAgentLine = "User-Agent: edge-outbox/" OUTBOX_VERSION;

// Points connection.header_nodes at `headers` as libcurl's header lines and
// returns the list's head. The User-Agent goes in as one more line rather
// than CURLOPT_USERAGENT, which libcurl would format anew for every request;
// a configured or row User-Agent header replaces it.
curl_slist* HeaderListFor(Connection& connection, const Headers& headers) {
  std::vector<std::string>& lines = connection.header_lines;
  std::size_t count = 0;
  const auto next_line = [&lines, &count]() -> std::string& {
    if (lines.size() == count) lines.emplace_back();
    return lines[count++];
  };
  bool has_user_agent = false;
  for (const auto& [name, value] : headers) {
    has_user_agent = has_user_agent || internal::EqualsIgnoreCase(name, "User-Agent");
    std::string& line = next_line();
    line.assign(name);
    // "Name;" is libcurl's spelling of a header with an empty value.
    if (value.empty()) {
      line += ';';
    } else {
      line.append(": ").append(value);
    }
  }
  if (!has_user_agent) next_line().assign(kUserAgentLine);
  // An empty "Expect:" stops libcurl from waiting for 100-continue before
  // sending a larger body: one round trip saved per request.
  next_line().assign("Expect:");
  std::vector<curl_slist>& nodes = connection.header_nodes;
  nodes.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    nodes[i].data = lines[i].data();
    nodes[i].next = i + 1 < count ? &nodes[i + 1] : nullptr;
  }
  return nodes.data();
}



// CURLOPT_WRITEFUNCTION. Keeps the start of the body for Result::error and
// reads (and drops) the rest, so the connection stays reusable.
size_t OnResponseBody(char* data, size_t size, size_t count, void* user) noexcept {
  auto* connection = static_cast<Connection*>(user);
  const std::size_t bytes = size * count;
  try {
    const std::size_t room = connection->excerpt_cap - connection->body_excerpt.size();
    connection->body_excerpt.append(data, std::min(room, bytes));
  } catch (...) {
    return CURL_WRITEFUNC_ERROR;  // no exception may cross into libcurl
  }
  return bytes;
}

}  // namespace

namespace internal {

void EnsureCurlInitialized() {
  static const CURLcode code = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (code != CURLE_OK) {
    throw std::runtime_error(std::string("libcurl initialisation failed: ") +
                             curl_easy_strerror(code));
  }
}

}  // namespace internal

class Endpoint::Impl {
 public:
  explicit Impl(EndpointOptions options) : options_(std::move(options)) {
    Validate(options_);
    internal::EnsureCurlInitialized();
    CollectSecrets();
    // Create the first connection now, so that an option libcurl rejects
    // surfaces at construction, not at the first message.
    std::unique_ptr<Connection> first = NewConnection();
    idle_.push_back(first.get());
    connections_.push_back(std::move(first));
  }

  const EndpointOptions& options() const { return options_; }

  // Compresses `body` when the options say so, then sends it. `body` is a
  // view: a plain message's payload goes out without a copy.
  Result Post(std::string_view body, Headers headers);

  Result Send(std::string_view body, const Headers& headers);

  void AbortAll() {
    std::lock_guard lock(mutex_);
    aborted_.store(true);
    // The flag is set before the wakeups, and a wakeup is remembered until
    // the next poll, so a transfer about to poll still sees it.
    for (const auto& connection : connections_) curl_multi_wakeup(connection->multi.get());
  }

  void ResetAbort() { aborted_.store(false); }

  Result MessageFailureWithoutIo(std::string error) const {
    Result result;
    result.outcome = Outcome::kMessageFailure;
    result.error = Redact(std::move(error));
    return result;
  }

 private:
  // How a transfer ended when it did not produce a CURLcode.
  enum class Interrupted { kNo, kAborted, kMultiError };

  // A connection taken from the pool for one transfer, given back (with the
  // per-request pointers cleared) however the transfer ends.
  class Lease {
   public:
    explicit Lease(Impl& pool) : pool_(pool), connection_(pool.Acquire()) {}
    ~Lease() {
      curl_easy_setopt(connection_->easy.get(), CURLOPT_HTTPHEADER, nullptr);
      curl_easy_setopt(connection_->easy.get(), CURLOPT_POSTFIELDS, nullptr);
      pool_.Release(connection_);
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Connection& operator*() const { return *connection_; }
    Connection* operator->() const { return connection_; }

   private:
    Impl& pool_;
    Connection* connection_;
  };

  std::unique_ptr<Connection> NewConnection() const;
  Connection* Acquire();
  void Release(Connection* connection);
  Interrupted Drive(Connection& connection, CURLcode& code, std::string& multi_error);
  void CollectSecrets();
  std::string Redact(std::string text) const;

  const EndpointOptions options_;
  // Configured values that must never appear in Result::error.
  std::vector<std::string> secrets_;
  std::size_t longest_secret_ = 0;
  std::atomic<bool> aborted_{false};

  std::mutex mutex_;
  // Every connection ever made, alive until the Endpoint is destroyed so that
  // AbortAll can wake any of them. Guarded by mutex_.
  std::vector<std::unique_ptr<Connection>> connections_;
  // Connections not in use; the last one back is the next one out, so a
  // worker calling again finds its warm connection. Guarded by mutex_.
  std::vector<Connection*> idle_;
};

std::unique_ptr<Connection> Endpoint::Impl::NewConnection() const {
  auto connection = std::make_unique<Connection>();
  connection->easy.reset(curl_easy_init());
  connection->multi.reset(curl_multi_init());
  connection->url = internal::NewCurlUrl();
  if (!connection->easy || !connection->multi) throw std::bad_alloc();
  // Parsed as Validate parsed it, so it cannot fail here but for memory.
  if (const CURLUcode code =
          curl_url_set(connection->url.get(), CURLUPART_URL, options_.url.c_str(), 0);
      code != CURLUE_OK) {
    throw std::runtime_error(std::string("libcurl rejected url: ") + curl_url_strerror(code));
  }
  // Room for a secret straddling the cut, so Redact can still recognise it.
  connection->excerpt_cap =
      std::max(options_.max_error_body_bytes + longest_secret_, options_.response_body_bytes);
  // Reserved once: the write callback then never allocates.
  connection->body_excerpt.reserve(connection->excerpt_cap);

  CURL* easy = connection->easy.get();
  const TlsOptions& tls = options_.tls;
  const auto set = [easy](CURLoption option, auto value, const char* name) {
    const CURLcode code = curl_easy_setopt(easy, option, value);
    if (code != CURLE_OK) {
      throw std::runtime_error(std::string("libcurl rejected ") + name + ": " +
                               curl_easy_strerror(code));
    }
  };
  set(CURLOPT_CURLU, connection->url.get(), "url");
  set(CURLOPT_NOSIGNAL, 1L, "CURLOPT_NOSIGNAL");  // no SIGALRM in a threaded process
  set(CURLOPT_POST, 1L, "CURLOPT_POST");
  set(CURLOPT_PROTOCOLS_STR, "http,https", "CURLOPT_PROTOCOLS_STR");
  set(CURLOPT_FOLLOWLOCATION, 0L, "CURLOPT_FOLLOWLOCATION");
  set(CURLOPT_TCP_NODELAY, 1L, "CURLOPT_TCP_NODELAY");
  set(CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout_ms),
      "connect_timeout_ms");
  set(CURLOPT_TIMEOUT_MS, static_cast<long>(options_.timeout_ms), "timeout_ms");
  // Ending a transfer that is still resolving a name (abort or timeout) would
  // otherwise wait for getaddrinfo to return, which during a DNS outage can
  // take many seconds; this lets libcurl's resolver thread finish and clean
  // up on its own, so AbortAll and the timeouts stay prompt.
  set(CURLOPT_QUICK_EXIT, 1L, "CURLOPT_QUICK_EXIT");
  set(CURLOPT_ERRORBUFFER, connection->error.data(), "CURLOPT_ERRORBUFFER");
  set(CURLOPT_WRITEFUNCTION, &OnResponseBody, "CURLOPT_WRITEFUNCTION");
  set(CURLOPT_WRITEDATA, static_cast<void*>(connection.get()), "CURLOPT_WRITEDATA");
  // HTTP/2 when the server offers it in the TLS handshake; HTTP/1.1 otherwise.
  // A libcurl built without HTTP/2 refuses the option, and then 1.1 it is.
  curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
  const long verify = tls.insecure_skip_verify ? 0L : 1L;
  set(CURLOPT_SSL_VERIFYPEER, verify, "tls.insecure_skip_verify");
  set(CURLOPT_SSL_VERIFYHOST, verify * 2, "tls.insecure_skip_verify");
  if (!tls.ca_file.empty()) set(CURLOPT_CAINFO, tls.ca_file.c_str(), "tls.ca_file");
  if (!tls.client_cert_file.empty()) {
    set(CURLOPT_SSLCERT, tls.client_cert_file.c_str(), "tls.client_cert_file");
  }
  if (!tls.client_key_file.empty()) {
    set(CURLOPT_SSLKEY, tls.client_key_file.c_str(), "tls.client_key_file");
  }
  return connection;
}

Connection* Endpoint::Impl::Acquire() {
  {
    std::lock_guard lock(mutex_);
    if (!idle_.empty()) {
      Connection* connection = idle_.back();
      idle_.pop_back();
      return connection;
    }
  }
  std::unique_ptr<Connection> fresh = NewConnection();
  Connection* connection = fresh.get();
  std::lock_guard lock(mutex_);
  connections_.push_back(std::move(fresh));
  return connection;
}

void Endpoint::Impl::Release(Connection* connection) {
  std::lock_guard lock(mutex_);
  idle_.push_back(connection);
}

Endpoint::Impl::Interrupted Endpoint::Impl::Drive(Connection& connection, CURLcode& code,
                                                  std::string& multi_error) {
  CURLM* multi = connection.multi.get();
  CURL* easy = connection.easy.get();
  CURLMcode status = curl_multi_add_handle(multi, easy);
  Interrupted interrupted = Interrupted::kNo;
  while (status == CURLM_OK) {
    if (aborted_.load()) {
      interrupted = Interrupted::kAborted;
      break;
    }
    int running = 0;
    status = curl_multi_perform(multi, &running);
    if (status != CURLM_OK) break;
    if (running == 0) {
      int queued = 0;
      const CURLMsg* message = curl_multi_info_read(multi, &queued);
      code = (message != nullptr && message->msg == CURLMSG_DONE) ? message->data.result
                                                                  : CURLE_GOT_NOTHING;
      break;
    }
    status = curl_multi_poll(multi, nullptr, 0, kPollTimeoutMs, nullptr);
  }
  if (status != CURLM_OK) {
    interrupted = Interrupted::kMultiError;
    multi_error = std::string("libcurl: ") + curl_multi_strerror(status);
  }
  // Removing an unfinished transfer closes its connection; a finished one
  // stays in the multi handle's cache for the next request.
  curl_multi_remove_handle(multi, easy);
  return interrupted;
}

Result Endpoint::Impl::Send(std::string_view body, const Headers& headers) {
  const SteadyClock::time_point start = SteadyClock::now();
  Result result;
  if (aborted_.load()) {
    result.error = "aborted";
  } else {
    const Lease connection(*this);
    CURL* easy = connection->easy.get();
    connection->body_excerpt.clear();
    connection->error[0] = '\0';
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, HeaderListFor(*connection, headers));
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));

    CURLcode code = CURLE_OK;
    std::string multi_error;
    const Interrupted interrupted = Drive(*connection, code, multi_error);
    if (interrupted == Interrupted::kAborted) {
      result.error = "aborted";
    } else if (interrupted == Interrupted::kMultiError) {
      result.error = std::move(multi_error);
    } else {
      long status = 0;
      curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
      std::string_view retry_after;
      curl_header* header = nullptr;
      // Only a failed exchange can be told when to come back; a delivered
      // message skips the walk over the response's headers.
      if ((status < 200 || status > 299) &&
          curl_easy_header(easy, "Retry-After", 0, CURLH_HEADER, -1, &header) == CURLHE_OK) {
        retry_after = header->value;
      }
      result = Classify(code, status, retry_after, util::NowMs(), options_.max_retry_after_ms);
      if (code != CURLE_OK && connection->error[0] != '\0') {
        result.error = connection->error.data();  // more precise than the code's text
      } else if (result.outcome == Outcome::kDelivered && options_.response_body_bytes > 0) {
        result.response_body = connection->body_excerpt.substr(
            0, std::min(options_.response_body_bytes, connection->body_excerpt.size()));
      } else if (result.outcome != Outcome::kDelivered) {
        // Redacted before it is cut, so that no prefix of a secret survives
        // at the cut.
        const std::string excerpt =
            std::string(util::TruncateUtf8(Redact(OneLine(connection->body_excerpt)),
                                              options_.max_error_body_bytes));
        if (!excerpt.empty()) result.error += ": " + excerpt;
      }
    }
  }
  result.error = Redact(std::move(result.error));
  result.request_bytes = body.size();
  result.duration_us =
      std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - start).count();
  return result;
}

Result Endpoint::Impl::Post(std::string_view body, Headers headers) {
  const bool compress = options_.compression == Compression::kGzip &&
                        body.size() >= options_.compress_min_bytes;
  std::string compressed;
  if (compress) {
    // The signature in `headers` was made over the uncompressed body: the
    // receiver checks it after decoding, as Standard Webhooks expects.
    compressed = internal::Gzip(body);
    body = compressed;
    headers.emplace_back("Content-Encoding", "gzip");
  }
  Result result = Send(body, headers);
  if (compress && result.http_status == 415) {
    // Unsupported Media Type to a compressed body refuses the encoding, which
    // every message would meet: the endpoint's configuration is wrong, not
    // this message.
    result.outcome = Outcome::kEndpointFailure;
    result.configuration_failure = true;
    result.error =
        "HTTP 415 to a gzip body: the receiver does not accept Content-Encoding: gzip (set "
        "compression to none or make it decode gzip)" +
        result.error.substr(std::min(result.error.size(), std::string_view("HTTP 415").size()));
  }
  return result;
}

void Endpoint::Impl::CollectSecrets() {
  const auto add = [this](std::string_view value) {
    if (value.size() < kMinRedactedBytes) return;
    secrets_.emplace_back(value);
    longest_secret_ = std::max(longest_secret_, value.size());
  };
  for (const auto& [name, value] : options_.headers) {
    add(value);
    // "Bearer <token>": the token alone may be echoed back too.
    if (const std::size_t space = value.rfind(' '); space != std::string::npos) {
      add(std::string_view(value).substr(space + 1));
    }
  }
  for (const std::string& secret : options_.signing_secrets) {
    add(secret);
    add(std::string_view(secret).substr(secret.find('_') + 1));
  }
  // Longest first: replacing a secret's own substring first would leave the
  // rest of the longer secret in the text.
  std::sort(secrets_.begin(), secrets_.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

std::string Endpoint::Impl::Redact(std::string text) const {
  for (const std::string& secret : secrets_) ReplaceAll(text, secret, kRedacted);
  return text;
}

Endpoint::Endpoint(EndpointOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Endpoint::~Endpoint() = default;

const EndpointOptions& Endpoint::options() const { return impl_->options(); }

Result Endpoint::Push(const Message& message) {
  const EndpointOptions& options = impl_->options();
  // Only a structured CloudEvent wraps the payload; otherwise the payload is
  // the body as it is and is sent from the row without a copy.
  std::string envelope;
  std::string_view body = message.payload;
  Headers headers;
  try {
    if (options.cloudevents == CloudEventsMode::kStructured) {
      envelope = BuildBody(options, message);
      body = envelope;
    }
    // The clock is read only for what uses it: the webhook timestamp.
    const std::int64_t now_s = options.signing_secrets.empty() ? 0 : util::NowMs() / 1000;
    headers = BuildHeaders(options, message, body, now_s);
  } catch (const std::invalid_argument& error) {
    // A malformed row is the message's own fault; no request is made.
    return impl_->MessageFailureWithoutIo(error.what());
  }
  return impl_->Post(body, std::move(headers));
}

Result Endpoint::PushBatch(std::span<const Message> messages) {
  const EndpointOptions& options = impl_->options();
  if (messages.empty()) throw std::invalid_argument("PushBatch: the batch is empty");
  if (messages.size() > options.batch.max_messages) {
    throw std::invalid_argument("batch.max_messages: a batch of " +
                                std::to_string(messages.size()) + " messages exceeds " +
                                std::to_string(options.batch.max_messages));
  }
  std::size_t payload_bytes = 0;
  for (const Message& message : messages) payload_bytes += message.payload.size();
  if (messages.size() > 1 && payload_bytes > options.batch.max_bytes) {
    throw std::invalid_argument("batch.max_bytes: a batch of " + std::to_string(payload_bytes) +
                                " payload bytes exceeds " +
                                std::to_string(options.batch.max_bytes));
  }
  std::string body;
  Headers headers;
  try {
    body = options.batch.format == BatchFormat::kNdjson ? BuildNdjsonBatch(messages)
                                                        : BuildCloudEventsBatch(options, messages);
    headers = BuildBatchHeaders(options, BatchId(messages), body, util::NowMs() / 1000);
  } catch (const std::invalid_argument& error) {
    return impl_->MessageFailureWithoutIo(error.what());
  }
  return impl_->Post(body, std::move(headers));
}

void Endpoint::AbortAll() { impl_->AbortAll(); }

void Endpoint::ResetAbort() { impl_->ResetAbort(); }

}  // namespace outbox::transport
