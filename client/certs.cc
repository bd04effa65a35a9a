#include "client/certs.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/credentials.h"
#include "common/private_dir.h"
#include "common/status_macros.h"
#include "common/tls.h"

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

// Writes <stem>.key and <stem>.crt beside any that exist, then renames them
// over those: a daemon never reads half a file.
absl::Status WriteKeyAndCert(const std::string& stem, EVP_PKEY* key, X509* cert) {
  const std::string key_path = stem + ".key", cert_path = stem + ".crt";
  const std::string new_key = key_path + ".new", new_cert = cert_path + ".new";
  unlink(new_key.c_str());
  unlink(new_cert.c_str());
  {
    ASSIGN_OR_RETURN(File key_file, Create(new_key, 0600));
    if (PEM_write_PrivateKey(key_file.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
      return OpenSslError("writing " + new_key);
    }
    ASSIGN_OR_RETURN(File cert_file, Create(new_cert, 0644));
    if (PEM_write_X509(cert_file.get(), cert) != 1) return OpenSslError("writing " + new_cert);
    if (fflush(key_file.get()) != 0 || fflush(cert_file.get()) != 0) {
      return absl::InternalError(absl::StrCat("cannot write ", stem, ": ", strerror(errno)));
    }
  }
  if (rename(new_key.c_str(), key_path.c_str()) != 0 ||
      rename(new_cert.c_str(), cert_path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot replace ", stem, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Cert> ReadCert(const std::string& path) {
  File file(fopen(path.c_str(), "r"));
  if (!file) return absl::FailedPreconditionError(absl::StrCat("cannot read ", path));
  Cert cert(PEM_read_X509(file.get(), nullptr, nullptr, nullptr));
  if (!cert) return absl::FailedPreconditionError(absl::StrCat(path, " holds no certificate"));
  return cert;
}

// The DNS names and IP addresses of `cert`'s subjectAltName, as text.
std::vector<std::string> NamesOf(X509* cert) {
  std::vector<std::string> names;
  auto* alt =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (alt == nullptr) return names;
  for (int i = 0; i < sk_GENERAL_NAME_num(alt); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(alt, i);
    if (name->type == GEN_DNS) {
      const ASN1_IA5STRING* dns = name->d.dNSName;
      names.emplace_back(reinterpret_cast<const char*>(dns->data), dns->length);
    } else if (name->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = name->d.iPAddress;
      char text[INET6_ADDRSTRLEN] = "";
      inet_ntop(ip->length == 4 ? AF_INET : AF_INET6, ip->data, text, sizeof(text));
      names.emplace_back(text);
    }
  }
  GENERAL_NAMES_free(alt);
  return names;
}

// "2029-02-27", the last day `cert` is valid.
std::string Expiry(X509* cert) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) != 1) return "?";
  char text[16];
  strftime(text, sizeof(text), "%Y-%m-%d", &tm);
  return text;
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
  std::string extended_usage;  // "serverAuth,clientAuth"; empty for the CA
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

// The coordinator's: it alone names kCoordinatorName, which every client of
// the coordinator checks for; also localhost and `hosts`, for other tools.
Profile CoordinatorProfile(const std::vector<std::string>& hosts) {
  std::vector<std::string> names = {kCoordinatorName, "localhost", "127.0.0.1", "::1"};
  for (const std::string& host : hosts) {
    if (std::find(names.begin(), names.end(), host) == names.end()) names.push_back(host);
  }
  return {"ringmaster:coordinator", false, "serverAuth", names};
}

Profile AdminProfile() { return {std::string(kAdminCertificateName), false, "clientAuth", {}}; }

// A worker's names only its id, which clients of its agent check for.
Profile WorkerProfile(const std::string& id) {
  return {absl::StrCat(kWorkerCertificatePrefix, id), false, "serverAuth,clientAuth", {id}};
}

// A user's: a client certificate whose common name is all a coordinator
// reads.
Profile UserProfile(const std::string& name) {
  return {absl::StrCat(kUserCertificatePrefix, name), false, "clientAuth", {}};
}

// Why a certificate that names `names` must be made again to match
// `profile`; empty when it does.
std::string WhyReissue(const Profile& profile, const std::vector<std::string>& names) {
  std::vector<std::string> missing, extra;
  for (const std::string& name : profile.alt_names) {
    if (std::find(names.begin(), names.end(), name) == names.end()) missing.push_back(name);
  }
  for (const std::string& name : names) {
    if (std::find(profile.alt_names.begin(), profile.alt_names.end(), name) ==
        profile.alt_names.end()) {
      extra.push_back(name);
    }
  }
  if (profile.common_name == "ringmaster:coordinator") {
    // Names are only ever added to the coordinator's: hosts given before stay.
    if (missing.empty()) return "";
    return absl::StrCat("adds ", absl::StrJoin(missing, ", "));
  }
  if (!extra.empty()) {
    return absl::StrCat("named more than ", profile.common_name, " (", absl::StrJoin(extra, ", "),
                        ")");
  }
  if (!missing.empty()) return absl::StrCat("adds ", absl::StrJoin(missing, ", "));
  return "";
}

}  // namespace

absl::StatusOr<std::vector<IssuedCertificate>> InitCertificates(const std::string& dir,
                                                                const CertsOptions& options) {
  for (const std::string& id : options.worker_ids) {
    if (id == kCoordinatorName) {
      return absl::InvalidArgumentError(
          absl::StrCat("--worker ", id, ": that is the coordinator's name, not a worker's"));
    }
  }
  for (const std::string& user : options.users) {
    if (absl::Status s = ValidateUserName(user); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--user: ", s.message()));
    }
  }
  RETURN_IF_ERROR(MakePrivateDir(dir));
  std::vector<IssuedCertificate> issued;
  if (!Exists(dir + "/ca.crt")) {
    ASSIGN_OR_RETURN(auto ca, Make({"ringmaster cluster CA", true, "", {}}, nullptr, nullptr,
                                   options.valid_days * 4));
    RETURN_IF_ERROR(WriteKeyAndCert(dir + "/ca", ca.first.get(), ca.second.get()));
    issued.push_back({dir + "/ca.crt", "new", Expiry(ca.second.get())});
  }
  ASSIGN_OR_RETURN(auto ca, ReadCa(dir));

  std::vector<std::pair<std::string, Profile>> wanted = {
      {"coordinator", CoordinatorProfile(options.hosts)}, {"admin", AdminProfile()}};
  for (const std::string& id : options.worker_ids) {
    wanted.push_back({"worker-" + id, WorkerProfile(id)});
  }
  for (const std::string& user : options.users) {
    wanted.push_back({"user-" + user, UserProfile(user)});
  }
  for (auto& [stem, profile] : wanted) {
    const std::string path = absl::StrCat(dir, "/", stem);
    std::string reason = "new";
    if (Exists(path + ".crt")) {
      ASSIGN_OR_RETURN(Cert old, ReadCert(path + ".crt"));
      const std::vector<std::string> names = NamesOf(old.get());
      if (stem == "coordinator") {  // keeps the hosts given before
        std::vector<std::string> hosts = names;
        hosts.insert(hosts.end(), options.hosts.begin(), options.hosts.end());
        profile = CoordinatorProfile(hosts);
      }
      reason = WhyReissue(profile, names);
      if (reason.empty()) continue;
    }
    ASSIGN_OR_RETURN(auto made, Make(profile, ca.first.get(), ca.second.get(), options.valid_days));
    RETURN_IF_ERROR(WriteKeyAndCert(path, made.first.get(), made.second.get()));
    issued.push_back({path + ".crt", reason, Expiry(made.second.get())});
  }
  return issued;
}

absl::StatusOr<std::vector<IssuedCertificate>> RenewCertificates(const std::string& dir,
                                                                 int valid_days) {
  ASSIGN_OR_RETURN(auto ca, ReadCa(dir));
  std::vector<std::string> stems;
  DIR* listing = opendir(dir.c_str());
  if (listing == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("cannot list ", dir, ": ", strerror(errno)));
  }
  while (const dirent* entry = readdir(listing)) {
    absl::string_view stem = entry->d_name;
    if (absl::ConsumeSuffix(&stem, ".crt") && stem != "ca") stems.emplace_back(stem);
  }
  closedir(listing);
  std::sort(stems.begin(), stems.end());
  std::vector<IssuedCertificate> issued;
  for (const std::string& stem : stems) {
    const std::string path = absl::StrCat(dir, "/", stem);
    ASSIGN_OR_RETURN(Cert old, ReadCert(path + ".crt"));
    Profile profile;
    if (stem == "coordinator") {
      profile = CoordinatorProfile(NamesOf(old.get()));
    } else if (stem == "admin") {
      profile = AdminProfile();
    } else if (absl::StartsWith(stem, "worker-")) {
      profile = WorkerProfile(stem.substr(strlen("worker-")));
    } else if (absl::StartsWith(stem, "user-")) {
      profile = UserProfile(stem.substr(strlen("user-")));
    } else {
      continue;  // not one `certs init` makes
    }
    ASSIGN_OR_RETURN(auto made, Make(profile, ca.first.get(), ca.second.get(), valid_days));
    RETURN_IF_ERROR(WriteKeyAndCert(path, made.first.get(), made.second.get()));
    issued.push_back({path + ".crt", "renewed", Expiry(made.second.get())});
  }
  return issued;
}

}  // namespace ringmaster
