#include "client/certs.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/credentials.h"
#include "common/private_dir.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

struct Freer {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(FILE* p) const { fclose(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Freer>;
using Cert = std::unique_ptr<X509, Freer>;
using File = std::unique_ptr<FILE, Freer>;

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

absl::Status OpenSslError(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, " failed (OpenSSL)"));
}

// Writes `mode` from the start: a key is never readable by others, even briefly.
absl::StatusOr<File> Create(const std::string& path, mode_t mode) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return absl::FailedPreconditionError(absl::StrCat("cannot create ", path));
  return File(fdopen(fd, "w"));
}

absl::Status WriteKeyAndCert(const std::string& stem, EVP_PKEY* key, X509* cert) {
  ASSIGN_OR_RETURN(File key_file, Create(stem + ".key", 0600));
  if (PEM_write_PrivateKey(key_file.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return OpenSslError("writing " + stem + ".key");
  }
  ASSIGN_OR_RETURN(File cert_file, Create(stem + ".crt", 0644));
  if (PEM_write_X509(cert_file.get(), cert) != 1) return OpenSslError("writing " + stem + ".crt");
  return absl::OkStatus();
}

absl::StatusOr<std::pair<Key, Cert>> ReadCa(const std::string& dir) {
  File key_file(fopen((dir + "/ca.key").c_str(), "r"));
  File cert_file(fopen((dir + "/ca.crt").c_str(), "r"));
  if (!key_file || !cert_file) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read ", dir, "/ca.key and ca.crt to sign with"));
  }
  Key key(PEM_read_PrivateKey(key_file.get(), nullptr, nullptr, nullptr));
  Cert cert(PEM_read_X509(cert_file.get(), nullptr, nullptr, nullptr));
  if (!key || !cert) return OpenSslError("reading the CA in " + dir);
  return std::make_pair(std::move(key), std::move(cert));
}

// "DNS:a,IP:127.0.0.1,..." for subjectAltName.
std::string AltNames(const std::vector<std::string>& names) {
  std::vector<std::string> parts;
  for (const std::string& name : names) {
    unsigned char buffer[16];
    const bool ip = inet_pton(AF_INET, name.c_str(), buffer) == 1 ||
                    inet_pton(AF_INET6, name.c_str(), buffer) == 1;
    parts.push_back(absl::StrCat(ip ? "IP:" : "DNS:", name));
  }
  return absl::StrJoin(parts, ",");
}

struct Profile {
  std::string common_name;
  bool ca = false;
  std::string extended_usage;        // "serverAuth,clientAuth"; empty for the CA
  std::vector<std::string> alt_names;
};

// A new P-256 key and its certificate, signed by `issuer` (self when null).
absl::StatusOr<std::pair<Key, Cert>> Make(const Profile& profile, EVP_PKEY* issuer_key,
                                          X509* issuer, int valid_days) {
  Key key(EVP_EC_gen("P-256"));
  Cert cert(X509_new());
  if (!key || !cert) return OpenSslError("making a key");
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof(serial));
  serial[0] &= 0x7f;  // positive
  BIGNUM* serial_bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(serial_bn, X509_get_serialNumber(cert.get()));
  BN_free(serial_bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(valid_days) * 86400);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("ringmaster"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(profile.common_name.c_str()),
                             -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, signer, cert.get(), nullptr, nullptr, 0);
  std::vector<std::pair<int, std::string>> extensions = {
      {NID_basic_constraints, profile.ca ? "critical,CA:TRUE,pathlen:0" : "critical,CA:FALSE"},
      {NID_key_usage,
       profile.ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature,keyAgreement"},
      {NID_subject_key_identifier, "hash"},
  };
  if (!profile.ca) extensions.push_back({NID_authority_key_identifier, "keyid:always"});
  if (!profile.extended_usage.empty()) {
    extensions.push_back({NID_ext_key_usage, profile.extended_usage});
  }
  if (!profile.alt_names.empty()) {
    extensions.push_back({NID_subject_alt_name, AltNames(profile.alt_names)});
  }
  for (const auto& [nid, value] : extensions) {
    X509_EXTENSION* ext = X509V3_EXT_nconf_nid(nullptr, &ctx, nid, value.c_str());
    if (ext == nullptr) return OpenSslError(absl::StrCat("certificate extension ", value));
    X509_add_ext(cert.get(), ext, -1);
    X509_EXTENSION_free(ext);
  }
  if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key.get(), EVP_sha256()) == 0) {
    return OpenSslError("signing " + profile.common_name);
  }
  return std::make_pair(std::move(key), std::move(cert));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> InitCertificates(const std::string& dir,
                                                          const CertsOptions& options) {
  RETURN_IF_ERROR(MakePrivateDir(dir));
  std::vector<std::string> written;
  if (!Exists(dir + "/ca.crt")) {
    ASSIGN_OR_RETURN(auto ca, Make({"ringmaster cluster CA", true, "", {}}, nullptr, nullptr,
                                   options.valid_days * 4));
    RETURN_IF_ERROR(WriteKeyAndCert(dir + "/ca", ca.first.get(), ca.second.get()));
    written.push_back(dir + "/ca.crt");
  }
  ASSIGN_OR_RETURN(auto ca, ReadCa(dir));
  std::vector<std::string> hosts = {"localhost", "127.0.0.1", "::1"};
  hosts.insert(hosts.end(), options.hosts.begin(), options.hosts.end());

  std::vector<std::pair<std::string, Profile>> wanted = {
      {"coordinator", {"ringmaster:coordinator", false, "serverAuth", hosts}},
      {"admin", {std::string(kAdminCertificateName), false, "clientAuth", {}}},
  };
  for (const std::string& id : options.worker_ids) {
    std::vector<std::string> names = {id};
    names.insert(names.end(), hosts.begin(), hosts.end());
    wanted.push_back({"worker-" + id, {absl::StrCat(kWorkerCertificatePrefix, id), false,
                                       "serverAuth,clientAuth", names}});
  }
  for (const auto& [stem, profile] : wanted) {
    const std::string path = absl::StrCat(dir, "/", stem);
    if (Exists(path + ".crt")) continue;
    ASSIGN_OR_RETURN(auto made,
                     Make(profile, ca.first.get(), ca.second.get(), options.valid_days));
    RETURN_IF_ERROR(WriteKeyAndCert(path, made.first.get(), made.second.get()));
    written.push_back(path + ".crt");
  }
  return written;
}

}  // namespace ringmaster
