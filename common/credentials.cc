#include "common/credentials.h"

#include <fcntl.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ringmaster {
namespace {

constexpr absl::string_view kWorkerKind = "rmw.";
constexpr absl::string_view kAgentKind = "rma.";
constexpr absl::string_view kJobKind = "rmj.";
constexpr absl::string_view kUserKind = "rmu.";
constexpr absl::string_view kReplicaKind = "rmr.";
constexpr absl::string_view kSessionKind = "rms.";
constexpr absl::string_view kLoginKind = "rml.";
constexpr absl::string_view kCsrfKind = "rmc.";
constexpr size_t kMaxUserName = 32;
constexpr size_t kKeyBytes = 32;

}  // namespace

absl::Status ValidateUserName(absl::string_view name) {
  const bool valid =
      !name.empty() && name.size() <= kMaxUserName &&
      (absl::ascii_islower(name[0]) || name[0] == '_') &&
      std::all_of(name.begin(), name.end(), [](char c) {
        return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_' || c == '.' || c == '-';
      });
  if (!valid) {
    return absl::InvalidArgumentError(absl::StrCat(
        "user name \"", absl::CHexEscape(name.substr(0, 40)), "\": use 1-", kMaxUserName,
        " of a-z, 0-9, '_', '.' and '-', starting with a letter or '_'"));
  }
  if (name == kAdminUser) {
    return absl::InvalidArgumentError(
        "user name \"admin\" is the admin credential's; pick another name");
  }
  return absl::OkStatus();
}

bool SameSecret(absl::string_view a, absl::string_view b) {
  // Every byte of the longer one is looked at, whatever the other holds.
  const size_t n = std::max(a.size(), b.size());
  unsigned char differ = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0;
    const unsigned char y = i < b.size() ? b[i] : 0;
    differ |= x ^ y;
  }
  return differ == 0;
}

std::string CredentialSigner::Sign(absl::string_view payload) const {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
       reinterpret_cast<const unsigned char*>(payload.data()), payload.size(), mac, &mac_len);
  return absl::StrCat(
      payload, ".",
      absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(mac), mac_len)));
}

std::string CredentialSigner::Worker(absl::string_view worker_id) const {
  return Sign(absl::StrCat(kWorkerKind, worker_id));
}

std::string CredentialSigner::Agent(absl::string_view worker_id) const {
  return Sign(absl::StrCat(kAgentKind, worker_id));
}

std::string CredentialSigner::User(absl::string_view name) const {
  return Sign(absl::StrCat(kUserKind, name));
}

std::string CredentialSigner::Session(absl::string_view who, absl::Time expires) const {
  return Sign(absl::StrCat(kSessionKind, absl::ToUnixSeconds(expires), ".", who));
}

std::string CredentialSigner::Csrf(absl::string_view session) const {
  const std::string signed_session = Sign(absl::StrCat(kCsrfKind, session));
  return signed_session.substr(signed_session.rfind('.') + 1);
}

std::string CredentialSigner::Login(absl::string_view who, absl::string_view nonce,
                                    absl::Time expires) const {
  return Sign(absl::StrCat(kLoginKind, absl::ToUnixSeconds(expires), ".", nonce, ".", who));
}

namespace {

// The fields after "<expiry>." of a signed payload, with the expiry (unix
// seconds) in `expires`: while `now` is before it; nullopt otherwise.
std::optional<absl::string_view> Unexpired(absl::string_view fields, absl::Time now,
                                           absl::Time* expires) {
  const size_t dot = fields.find('.');
  int64_t seconds = 0;
  if (dot == absl::string_view::npos || !absl::SimpleAtoi(fields.substr(0, dot), &seconds)) {
    return std::nullopt;
  }
  *expires = absl::FromUnixSeconds(seconds);
  if (now >= *expires) return std::nullopt;
  return fields.substr(dot + 1);
}

}  // namespace

std::optional<CredentialSigner::LoginCode> CredentialSigner::VerifyLogin(absl::string_view code,
                                                                         absl::Time now) const {
  const size_t dot = code.rfind('.');
  if (key_.empty() || dot == absl::string_view::npos) return std::nullopt;
  absl::string_view payload = code.substr(0, dot);
  if (!SameSecret(Sign(payload), code) || !absl::ConsumePrefix(&payload, kLoginKind)) {
    return std::nullopt;
  }
  LoginCode login;
  std::optional<absl::string_view> rest = Unexpired(payload, now, &login.expires);
  const size_t sep = rest ? rest->find('.') : absl::string_view::npos;
  if (sep == absl::string_view::npos) return std::nullopt;
  login.nonce = std::string(rest->substr(0, sep));
  login.who = std::string(rest->substr(sep + 1));
  return login;
}

std::string CredentialSigner::Job(absl::string_view job_id, int attempt) const {
  return Sign(absl::StrCat(kJobKind, attempt, ".", job_id));
}

std::string CredentialSigner::Replica(absl::string_view job_id) const {
  return Sign(absl::StrCat(kReplicaKind, job_id));
}

std::optional<Caller> CredentialSigner::Verify(absl::string_view token, absl::Time now) const {
  const size_t dot = token.rfind('.');
  if (key_.empty() || dot == absl::string_view::npos) return std::nullopt;
  const absl::string_view payload = token.substr(0, dot);
  if (!SameSecret(Sign(payload), token)) return std::nullopt;
  Caller caller;
  if (absl::StartsWith(payload, kWorkerKind)) {
    caller.role = Caller::Role::kWorker;
    caller.id = std::string(payload.substr(kWorkerKind.size()));
  } else if (absl::StartsWith(payload, kAgentKind)) {
    caller.role = Caller::Role::kAgent;
    caller.id = std::string(payload.substr(kAgentKind.size()));
  } else if (absl::StartsWith(payload, kUserKind)) {
    caller.role = Caller::Role::kUser;
    caller.id = std::string(payload.substr(kUserKind.size()));
  } else if (absl::StartsWith(payload, kSessionKind)) {
    std::optional<absl::string_view> who =
        Unexpired(payload.substr(kSessionKind.size()), now, &caller.expires);
    if (!who) return std::nullopt;
    caller.role = *who == kAdminUser ? Caller::Role::kAdmin : Caller::Role::kUser;
    if (caller.role == Caller::Role::kUser) caller.id = std::string(*who);
  } else if (absl::StartsWith(payload, kJobKind)) {
    const absl::string_view rest = payload.substr(kJobKind.size());
    const size_t sep = rest.find('.');
    if (sep == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, sep), &caller.attempt)) {
      return std::nullopt;
    }
    caller.role = Caller::Role::kJob;
    caller.id = std::string(rest.substr(sep + 1));
  } else {
    return std::nullopt;
  }
  return caller;
}

absl::StatusOr<std::string> LoadOrCreateKey(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) {
    unsigned char key[kKeyBytes];
    const bool made = RAND_bytes(key, sizeof(key)) == 1 &&
                      write(fd, key, sizeof(key)) == static_cast<ssize_t>(sizeof(key)) &&
                      fsync(fd) == 0;
    close(fd);
    if (!made) {
      unlink(path.c_str());
      return absl::FailedPreconditionError(absl::StrCat("cannot write the key ", path));
    }
    return std::string(reinterpret_cast<const char*>(key), sizeof(key));
  }
  if (errno != EEXIST) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create the key ", path, ": ", strerror(errno)));
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || (st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the key ", path, " must be readable by its owner only (chmod 600)"));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream key;
  key << in.rdbuf();
  if (!in || key.str().size() != kKeyBytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("the key ", path, " is unreadable or not ", kKeyBytes, " bytes"));
  }
  return key.str();
}

std::optional<Caller> CertificateCaller(absl::string_view common_name) {
  Caller caller;
  absl::string_view id = common_name;
  if (common_name == kAdminCertificateName) {
    caller.role = Caller::Role::kAdmin;
  } else if (absl::ConsumePrefix(&id, kWorkerCertificatePrefix) && !id.empty()) {
    caller.role = Caller::Role::kWorker;
    caller.id = std::string(id);
  } else if (id = common_name;
             absl::ConsumePrefix(&id, kUserCertificatePrefix) && ValidateUserName(id).ok()) {
    caller.role = Caller::Role::kUser;
    caller.id = std::string(id);
  } else {
    return std::nullopt;
  }
  return caller;
}

bool IsSessionToken(absl::string_view token) { return absl::StartsWith(token, kSessionKind); }

std::optional<std::string> BearerToken(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return std::nullopt;
  absl::string_view value(it->second.data(), it->second.size());
  if (!absl::ConsumePrefix(&value, "Bearer ")) return std::nullopt;
  return std::string(value);
}

std::optional<std::string> PeerCertificateName(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return std::nullopt;
  std::vector<grpc::string_ref> names = auth->FindPropertyValues("x509_common_name");
  if (names.empty()) return std::nullopt;
  return std::string(names.front().data(), names.front().size());
}

void AddBearerToken(grpc::ClientContext* context, const std::string& token) {
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
}

}  // namespace ringmaster
