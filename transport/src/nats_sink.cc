// The NATS JetStream sink: one publish per message, acknowledged by the
// stream, deduplicated by JetStream through the Nats-Msg-Id header.
#include <nats/nats.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "internal.h"
#include "outbox/transport.h"
#include "util/clock.h"

namespace outbox::transport::internal {
namespace {

// nats.c's text for the calling thread's last error, else the status's.
std::string LastError(natsStatus status) {
  const char* text = nats_GetLastError(nullptr);
  if (text != nullptr && *text != '\0') return text;
  return natsStatus_GetText(status);
}

// The line between "BEGIN <marker>" and the next "-----END"/"------END" of a
// .creds file.
std::string CredsBlock(const std::string& creds, std::string_view marker) {
  const std::size_t begin = creds.find(marker);
  if (begin == std::string::npos) return "";
  std::size_t start = creds.find('\n', begin);
  if (start == std::string::npos) return "";
  const std::size_t end = creds.find("END", start);
  std::string block = creds.substr(start + 1, end == std::string::npos ? end : end - start - 1);
  // What is left is the value and the dashes opening the END line.
  std::string value;
  for (const char c : block) {
    if (c == '-' || c == '\n' || c == '\r' || c == ' ' || c == '\t') continue;
    value += c;
  }
  return value;
}

// Copies for nats.c, which frees what the credential callbacks return.
char* Duplicate(const std::string& text) {
  char* copy = static_cast<char*>(std::malloc(text.size() + 1));
  if (copy != nullptr) std::memcpy(copy, text.c_str(), text.size() + 1);
  return copy;
}

struct OptionsDeleter {
  void operator()(natsOptions* options) const { natsOptions_Destroy(options); }
};

// One connection and its JetStream context. Shared by the calls using it, so
// that replacing a closed connection never pulls it from under a publish.
class Connection {
 public:
  Connection() = default;
  ~Connection() {
    if (js_ != nullptr) jsCtx_Destroy(js_);
    if (connection_ == nullptr) return;
    natsConnection_Close(connection_);
    // nats.c delivers its callbacks (the error handler, which points at the
    // sink) on a thread of its own, in order; the closed callback comes
    // last. Waiting for it means no callback runs after the sink is gone.
    std::unique_lock lock(mutex_);
    closed_changed_.wait_for(lock, std::chrono::seconds(10), [&] { return closed_; });
    lock.unlock();
    natsConnection_Destroy(connection_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // For natsOptions_SetClosedCB, with this Connection as the closure.
  static void OnClosed(natsConnection* /*connection*/, void* self) {
    auto* connection = static_cast<Connection*>(self);
    const std::lock_guard lock(connection->mutex_);
    connection->closed_ = true;
    connection->closed_changed_.notify_all();
  }

  natsConnection*& connection() { return connection_; }
  jsCtx*& js() { return js_; }

 private:
  natsConnection* connection_ = nullptr;
  jsCtx* js_ = nullptr;
  std::mutex mutex_;
  std::condition_variable closed_changed_;
  bool closed_ = false;  // GUARDED_BY(mutex_)
};

class NatsSink final : public BrokerSink {
 public:
  explicit NatsSink(EndpointOptions options)
      : BrokerSink(options.batch.max_messages),
        options_(std::move(options)),
        url_(ParseBrokerUrl(options_.url)) {
    nats_user_jwt_ = CredsBlock(options_.nats.credentials, "BEGIN NATS USER JWT");
    nats_creds_seed_ = CredsBlock(options_.nats.credentials, "BEGIN USER NKEY SEED");
    if (!options_.nats.credentials.empty() &&
        (nats_user_jwt_.empty() || !nats_creds_seed_.starts_with("SU"))) {
      throw std::invalid_argument("nats.credentials: no user JWT or user seed found");
    }
  }

  ~NatsSink() override {
    const std::lock_guard lock(mutex_);
    current_.reset();
  }

  SinkKind kind() const override { return SinkKind::kNats; }

  void AbortAll() override {
    const std::lock_guard lock(mutex_);
    aborted_ = true;
    dialed_.notify_all();
  }
  void ResetAbort() override {
    const std::lock_guard lock(mutex_);
    aborted_ = false;
  }

 private:
  Result Publish(const Message& message) override {
    if (aborted_) return EndpointFailure("aborted");
    std::string body;
    Headers headers;
    try {
      body = BuildBody(options_, message);
      headers = BuildHeaders(options_, message, body, util::NowMs() / 1000);
    } catch (const std::invalid_argument& error) {
      return MessageFailure(error.what());
    }
    Result connected;
    const std::shared_ptr<Connection> connection = Connect(connected);
    if (!connection) return connected;

    natsMsg* raw = nullptr;
    const std::string subject = url_.path;
    if (body.size() > static_cast<std::size_t>(INT32_MAX)) {
      return MessageFailure("message is larger than NATS can carry");
    }
    natsStatus status = natsMsg_Create(&raw, subject.c_str(), nullptr, body.data(),
                                       static_cast<int>(body.size()));
    if (status != NATS_OK) throw std::bad_alloc();
    const std::unique_ptr<natsMsg, void (*)(natsMsg*)> msg(raw, natsMsg_Destroy);
    // JetStream drops a second message with the same Nats-Msg-Id within the
    // stream's duplicate window and acknowledges it as a duplicate.
    const std::string id(message.message_id);
    status = natsMsgHeader_Set(msg.get(), "Nats-Msg-Id", id.c_str());
    for (const auto& [name, value] : headers) {
      if (status != NATS_OK) break;
      // Nats-Msg-Id carries the id already.
      if (EqualsIgnoreCase(name, "Idempotency-Key")) continue;
      status = natsMsgHeader_Add(msg.get(), name.c_str(), value.c_str());
    }
    if (status != NATS_OK) return MessageFailure("headers: " + LastError(status));

    jsPubOptions publish;
    jsPubOptions_Init(&publish);
    publish.MaxWait = options_.timeout_ms;
    publish.MsgId = id.c_str();
    jsPubAck* ack = nullptr;
    jsErrCode api_error = static_cast<jsErrCode>(0);
    const std::int64_t violations_before = permission_violations_.load();
    status = js_PublishMsg(&ack, connection->js(), msg.get(), &publish, &api_error);
    Result result;
    result.request_bytes = body.size();
    if (status == NATS_OK) {
      jsPubAck_Destroy(ack);
      result.outcome = Outcome::kDelivered;  // a duplicate's ack too
      return result;
    }
    const std::string text = LastError(status);
    const bool denied = status == NATS_NOT_PERMITTED ||
                        permission_violations_.load() != violations_before;
    Result failure = ClassifyFailure(status, api_error, text, denied);
    failure.request_bytes = body.size();
    if (aborted_) failure.error = "aborted";
    return failure;
  }

  Result ClassifyFailure(natsStatus status, jsErrCode api_error, const std::string& text,
                  bool denied) const {
    if (denied) {
      // The server refuses to let us publish to the subject (or to receive
      // the acknowledgement): the account's permissions, not the message.
      return EndpointFailure("authorization violation publishing to " + url_.path, true);
    }
    switch (status) {
      case NATS_NO_RESPONDERS:
        return EndpointFailure("no responders: no JetStream stream takes subject " + url_.path);
      case NATS_TIMEOUT:
        return EndpointFailure("timeout waiting for the JetStream acknowledgement");
      case NATS_MAX_PAYLOAD:
        return MessageFailure("message is larger than the server's max_payload");
      case NATS_ERR:
        if (api_error != 0) return ClassifyJetStreamError(api_error, text);
        break;
      default:
        break;
    }
    return EndpointFailure(text);
  }

  // The live connection, (re)made when there is none or it closed. One
  // caller dials at a time, without holding mutex_; the others wait for its
  // outcome (at most one connect timeout) instead of dialling in turn. On
  // failure returns null and sets `failure`.
  std::shared_ptr<Connection> Connect(Result& failure) {
    std::unique_lock lock(mutex_);
    if (dialing_) {
      dialed_.wait(lock, [&] { return !dialing_ || aborted_; });
      if (aborted_) {
        failure = EndpointFailure("aborted");
        return nullptr;
      }
      if (!current_) {
        failure = last_dial_failure_;
        return nullptr;
      }
    }
    if (current_) {
      const natsConnStatus status = natsConnection_Status(current_->connection());
      if (status == NATS_CONN_STATUS_CONNECTED) return current_;
      if (status != NATS_CONN_STATUS_CLOSED) {
        // nats.c reconnects by itself; publishing meanwhile would only sit
        // in its buffer until the timeout.
        failure = EndpointFailure("not connected to the NATS server (reconnecting)",
                                  last_dial_failure_.configuration_failure);
        return nullptr;
      }
      current_.reset();
    }
    dialing_ = true;
    lock.unlock();
    Result dial_failure;
    std::shared_ptr<Connection> connection = Dial(dial_failure);
    lock.lock();
    dialing_ = false;
    current_ = connection;
    last_dial_failure_ = connection ? Result{} : dial_failure;
    dialed_.notify_all();
    if (!connection) failure = dial_failure;
    return connection;
  }

  std::shared_ptr<Connection> Dial(Result& failure) {
    natsOptions* raw = nullptr;
    if (natsOptions_Create(&raw) != NATS_OK) throw std::bad_alloc();
    const std::unique_ptr<natsOptions, OptionsDeleter> nats_options(raw);
    natsStatus status = Configure(nats_options.get());
    if (status != NATS_OK) {
      failure = EndpointFailure("NATS options: " + LastError(status), true);
      return nullptr;
    }
    auto connection = std::make_shared<Connection>();
    status = natsOptions_SetClosedCB(nats_options.get(), &Connection::OnClosed, connection.get());
    if (status == NATS_OK) status = ConnectSigningAgain(*connection, nats_options.get());
    if (status != NATS_OK) {
      const bool auth = status == NATS_CONNECTION_AUTH_FAILED || status == NATS_NOT_PERMITTED;
      failure = EndpointFailure(
          (auth ? "authorization violation: " : "no connection: ") + LastError(status), auth);
      return nullptr;
    }
    jsOptions js_options;
    jsOptions_Init(&js_options);
    js_options.Wait = options_.timeout_ms;
    status = natsConnection_JetStream(&connection->js(), connection->connection(), &js_options);
    if (status != NATS_OK) {
      failure = EndpointFailure("JetStream context: " + LastError(status));
      return nullptr;
    }
    return connection;
  }

  // libnats 3.4 sends no signature when the signed nonce's first byte is
  // zero (its base64 encoder takes that for an empty string), so one NKey or
  // JWT connect in 256 is refused as an authorization violation. Another
  // connect signs a new nonce: that case is retried, never a real refusal.
  natsStatus ConnectSigningAgain(Connection& connection, natsOptions* nats_options) {
    natsStatus status = NATS_OK;
    int attempts = 0;
    do {
      signature_unsent_ = false;
      status = natsConnection_Connect(&connection.connection(), nats_options);
    } while (status != NATS_OK && signature_unsent_ && ++attempts < kUnsentSignatureAttempts);
    return status;
  }

  natsStatus Configure(natsOptions* nats_options) {
    const std::string server =
        std::string(url_.tls ? "tls://" : "nats://") +
        (url_.host.find(':') != std::string::npos ? "[" + url_.host + "]" : url_.host) + ":" +
        std::to_string(url_.port);
    natsStatus s = natsOptions_SetURL(nats_options, server.c_str());
    if (s == NATS_OK) s = natsOptions_SetName(nats_options, "edge-outbox");
    if (s == NATS_OK) s = natsOptions_SetTimeout(nats_options, options_.connect_timeout_ms);
    // Once connected, nats.c reconnects for ever in the background; a
    // request waiting for its acknowledgement fails at the disconnect
    // instead of at its timeout.
    if (s == NATS_OK) s = natsOptions_SetMaxReconnect(nats_options, -1);
    if (s == NATS_OK) s = natsOptions_SetReconnectWait(nats_options, 500);
    if (s == NATS_OK) s = natsOptions_SetFailRequestsOnDisconnect(nats_options, true);
    if (s == NATS_OK) s = natsOptions_SetErrorHandler(nats_options, &NatsSink::OnError, this);
    if (s == NATS_OK && url_.tls) {
      s = natsOptions_SetSecure(nats_options, true);
      const TlsOptions& tls = options_.tls;
      if (s == NATS_OK && !tls.ca_file.empty()) {
        s = natsOptions_LoadCATrustedCertificates(nats_options, tls.ca_file.c_str());
      }
      if (s == NATS_OK && !tls.client_cert_file.empty()) {
        const std::string& key =
            tls.client_key_file.empty() ? tls.client_cert_file : tls.client_key_file;
        s = natsOptions_LoadCertificatesChain(nats_options, tls.client_cert_file.c_str(),
                                              key.c_str());
      }
      if (s == NATS_OK && tls.insecure_skip_verify) {
        s = natsOptions_SkipServerVerification(nats_options, true);
      } else if (s == NATS_OK) {
        // nats.c checks the certificate's chain but its name only when told.
        s = natsOptions_SetExpectedHostname(nats_options, url_.host.c_str());
      }
    }
    const NatsOptions& auth = options_.nats;
    if (s == NATS_OK && !auth.user.empty()) {
      s = natsOptions_SetUserInfo(nats_options, auth.user.c_str(), auth.password.c_str());
    }
    if (s == NATS_OK && !auth.token.empty()) {
      s = natsOptions_SetToken(nats_options, auth.token.c_str());
    }
    if (s == NATS_OK && !auth.nkey.empty()) {
      s = natsOptions_SetNKey(nats_options, auth.nkey.c_str(), &NatsSink::SignWithNKey, this);
    }
    if (s == NATS_OK && !nats_user_jwt_.empty()) {
      s = natsOptions_SetUserCredentialsCallbacks(nats_options, &NatsSink::UserJwt, this,
                                                  &NatsSink::SignWithCreds, this);
    }
    return s;
  }

  // nats.c callbacks: C, on its threads, so nothing may throw out of them.

  static void OnError(natsConnection* /*connection*/, natsSubscription* /*subscription*/,
                      natsStatus error, void* closure) {
    if (error == NATS_NOT_PERMITTED) {
      static_cast<NatsSink*>(closure)->permission_violations_.fetch_add(1);
    }
  }

  natsStatus Sign(const std::string& seed, char** error_text, unsigned char** signature,
                  int* signature_length, const char* nonce) {
    const natsStatus status = nats_Sign(seed.c_str(), nonce, signature, signature_length);
    if (status != NATS_OK && error_text != nullptr) *error_text = Duplicate("cannot sign nonce");
    if (status == NATS_OK && *signature_length > 0 && (*signature)[0] == 0) {
      signature_unsent_ = true;
    }
    return status;
  }

  static natsStatus SignWithNKey(char** error_text, unsigned char** signature,
                                 int* signature_length, const char* nonce, void* closure) {
    auto* self = static_cast<NatsSink*>(closure);
    return self->Sign(self->options_.nats.nkey_seed, error_text, signature, signature_length,
                      nonce);
  }

  static natsStatus SignWithCreds(char** error_text, unsigned char** signature,
                                  int* signature_length, const char* nonce, void* closure) {
    auto* self = static_cast<NatsSink*>(closure);
    return self->Sign(self->nats_creds_seed_, error_text, signature, signature_length, nonce);
  }

  static natsStatus UserJwt(char** jwt, char** /*error_text*/, void* closure) {
    *jwt = Duplicate(static_cast<NatsSink*>(closure)->nats_user_jwt_);
    return *jwt == nullptr ? NATS_NO_MEMORY : NATS_OK;
  }

  const EndpointOptions options_;
  const BrokerUrl url_;
  std::string nats_user_jwt_;    // from options_.nats.credentials
  std::string nats_creds_seed_;  // likewise
  // Read without mutex_ on the publish path; written under it, so that a
  // wait on dialed_ cannot miss an abort.
  std::atomic<bool> aborted_{false};
  // Counts the server's "Permissions Violation" errors (reported apart from
  // the publish that caused them).
  std::atomic<std::int64_t> permission_violations_{0};
  // Set by the signing callbacks when libnats will drop the signature (see
  // ConnectSigningAgain). One dial at a time (Connect).
  std::atomic<bool> signature_unsent_{false};
  static constexpr int kUnsentSignatureAttempts = 4;
  std::mutex mutex_;
  std::condition_variable dialed_;       // a dial ended, or an abort
  bool dialing_ = false;                 // GUARDED_BY(mutex_)
  Result last_dial_failure_;             // GUARDED_BY(mutex_)
  std::shared_ptr<Connection> current_;  // GUARDED_BY(mutex_)
};

}  // namespace

std::unique_ptr<Sink> MakeNatsSink(EndpointOptions options) {
  return std::make_unique<NatsSink>(std::move(options));
}

}  // namespace outbox::transport::internal

namespace outbox::transport {

Result ClassifyJetStreamError(int code, std::string_view text) {
  const std::string error = "JetStream error " + std::to_string(code) + ": " + std::string(text);
  switch (code) {
    // The stream or the server cannot take anything right now.
    case JSAccountResourcesExceededErr:
    case JSClusterNoPeersErr:
    case JSClusterNotAvailErr:
    case JSClusterNotLeaderErr:
    case JSInsufficientResourcesErr:
    case JSMemoryResourcesExceededErr:
    case JSStorageResourcesExceededErr:
    case JSStreamLimitsErr:
    case JSStreamStoreFailedErr:  // e.g. a full stream with discard "new"
      return internal::EndpointFailure(error);
    case JSNotEnabledForAccountErr:
    case JSNotEnabledErr:
    case JSStreamNotFoundErr:
      return internal::EndpointFailure(error, true);
    default:
      // Message too large for the stream and the other answers about this
      // one message.
      return internal::MessageFailure(error);
  }
}

}  // namespace outbox::transport
