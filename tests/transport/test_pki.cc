#include "test_pki.h"

#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdlib.h>

#include <cstdio>
#include <stdexcept>

namespace outbox::transport::testing {
namespace {

void Check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test PKI: ") + what + " failed");
}

void AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &context, nid, value);
  Check(extension != nullptr, "X509V3_EXT_conf_nid");
  Check(X509_add_ext(cert, extension, -1) == 1, "X509_add_ext");
  X509_EXTENSION_free(extension);
}

template <typename WriteFn>
std::string WritePem(const std::filesystem::path& path, WriteFn write) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  Check(file != nullptr, "opening a PEM file");
  const bool written = write(file);
  std::fclose(file);
  Check(written, "writing a PEM file");
  return path.string();
}

// A P-256 key and a certificate for `common_name`, signed by `issuer` (or by
// itself when `issuer` is null), valid from an hour ago for a day.
KeyPair MakeKeyPair(const std::filesystem::path& directory, long serial, const char* common_name,
                    const KeyPair* issuer, bool is_ca, const char* subject_alt_name) {
  KeyPair pair;
  pair.key.reset(EVP_EC_gen("P-256"));
  Check(pair.key != nullptr, "EVP_EC_gen");
  pair.cert.reset(X509_new());
  X509* cert = pair.cert.get();
  Check(X509_set_version(cert, 2) == 1, "X509_set_version");
  ASN1_INTEGER_set(X509_get_serialNumber(cert), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name), -1, -1, 0);
  X509* issuer_cert = issuer != nullptr ? issuer->cert.get() : cert;
  EVP_PKEY* signing_key = issuer != nullptr ? issuer->key.get() : pair.key.get();
  Check(X509_set_issuer_name(cert, X509_get_subject_name(issuer_cert)) == 1,
        "X509_set_issuer_name");
  Check(X509_set_pubkey(cert, pair.key.get()) == 1, "X509_set_pubkey");
  AddExtension(cert, issuer_cert, NID_basic_constraints, is_ca ? "critical,CA:TRUE" : "CA:FALSE");
  if (is_ca) AddExtension(cert, issuer_cert, NID_key_usage, "critical,keyCertSign,cRLSign");
  if (subject_alt_name != nullptr) {
    AddExtension(cert, issuer_cert, NID_subject_alt_name, subject_alt_name);
  }
  Check(X509_sign(cert, signing_key, EVP_sha256()) > 0, "X509_sign");

  const std::string stem = directory / common_name;
  pair.cert_file =
      WritePem(stem + ".crt", [&](std::FILE* file) { return PEM_write_X509(file, cert) == 1; });
  pair.key_file = WritePem(stem + ".key", [&](std::FILE* file) {
    return PEM_write_PrivateKey(file, pair.key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1;
  });
  return pair;
}

}  // namespace

TestPki::TestPki() {
  std::string pattern = (std::filesystem::temp_directory_path() / "outbox-pki-XXXXXX").string();
  Check(mkdtemp(pattern.data()) != nullptr, "mkdtemp");
  directory_ = pattern;
  ca_ = MakeKeyPair(directory_, 1, "outbox-test-ca", nullptr, true, nullptr);
  server_ =
      MakeKeyPair(directory_, 2, "outbox-test-server", &ca_, false, "IP:127.0.0.1,DNS:localhost");
  client_ = MakeKeyPair(directory_, 3, "outbox-test-client", &ca_, false, nullptr);
}

TestPki::~TestPki() {
  std::error_code ignored;
  std::filesystem::remove_all(directory_, ignored);
}

X509_STORE* TestPki::NewCaStore() const {
  X509_STORE* store = X509_STORE_new();
  Check(store != nullptr && X509_STORE_add_cert(store, ca_.cert.get()) == 1, "X509_STORE_add_cert");
  return store;
}

}  // namespace outbox::transport::testing
