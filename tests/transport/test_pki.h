// Certificates made at test time with OpenSSL's C API: a self-signed CA, a
// server certificate for 127.0.0.1 and a client certificate, both issued by
// that CA. The PEM files live in a temporary directory removed at the end.
#pragma once

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <filesystem>
#include <memory>
#include <string>

namespace outbox::transport::testing {

struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};

struct KeyPair {
  std::unique_ptr<X509, X509Free> cert;
  std::unique_ptr<EVP_PKEY, PkeyFree> key;
  std::string cert_file;  // PEM
  std::string key_file;   // PEM, unencrypted
};

class TestPki {
 public:
  TestPki();
  ~TestPki();
  TestPki(const TestPki&) = delete;
  TestPki& operator=(const TestPki&) = delete;

  const KeyPair& ca() const { return ca_; }
  const KeyPair& server() const { return server_; }
  const KeyPair& client() const { return client_; }

  // A new store trusting the CA (httplib's SSLServer takes ownership).
  X509_STORE* NewCaStore() const;

 private:
  std::filesystem::path directory_;
  KeyPair ca_;
  KeyPair server_;
  KeyPair client_;
};

}  // namespace outbox::transport::testing
