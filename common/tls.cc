#include "common/tls.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "common/status_macros.h"
#include "common/token_file.h"

namespace ringmaster {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, bool secret) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot read ", path, ": ", strerror(errno),
                                                      " (make it with `ringmaster certs init`)"));
  }
  if (secret) RETURN_IF_ERROR(CheckSecretFileMode(path, "TLS key"));
  std::ifstream in(path);
  std::stringstream pem;
  pem << in.rdbuf();
  if (!in || pem.str().find("-----BEGIN") == std::string::npos) {
    return absl::FailedPreconditionError(absl::StrCat(path, " holds no PEM data"));
  }
  return pem.str();
}

// What answers on `address`, seen from its first bytes: a plaintext
// HTTP/2 server sends its SETTINGS frame at once; a TLS server answers the
// same bytes with an alert or by closing.
enum class Speaks { kPlaintext, kOther, kNothing };

Speaks Probe(const std::string& address) {
  const std::string host = HostOfAddress(address);
  const std::string port = address.substr(address.rfind(':') + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return Speaks::kNothing;
  absl::Cleanup free_found = [found] { freeaddrinfo(found); };
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Speaks::kNothing;
  absl::Cleanup close_fd = [fd] { close(fd); };
  timeval timeout{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  if (connect(fd, found->ai_addr, found->ai_addrlen) != 0) return Speaks::kNothing;
  static constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  (void)!write(fd, kPreface, sizeof(kPreface) - 1);
  unsigned char frame[9];
  size_t got = 0;
  while (got < sizeof(frame)) {
    const ssize_t n = read(fd, frame + got, sizeof(frame) - got);
    if (n <= 0) break;
    got += n;
  }
  return got == sizeof(frame) && frame[3] == 0x04 ? Speaks::kPlaintext : Speaks::kOther;
}

}  // namespace

absl::StatusOr<TlsFiles> LoadTls(const std::string& dir, const std::string& name) {
  TlsFiles files;
  absl::StatusOr<std::string> ca = ReadPem(dir + "/ca.crt", false);
  if (!ca.ok()) return ca.status();
  files.ca_pem = *std::move(ca);
  if (name.empty()) return files;
  absl::StatusOr<std::string> cert = ReadPem(absl::StrCat(dir, "/", name, ".crt"), false);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(absl::StrCat(dir, "/", name, ".key"), true);
  if (!key.ok()) return key.status();
  files.cert_pem = *std::move(cert);
  files.key_pem = *std::move(key);
  return files;
}

Tls CaOnly(std::string ca_pem) {
  if (ca_pem.empty()) return std::nullopt;
  return TlsFiles{std::move(ca_pem), "", ""};
}

absl::StatusOr<Tls> LoadClientTls(const std::string& dir, const ClientCertificate& which) {
  auto exists = [&dir](const std::string& stem) {
    return access(absl::StrCat(dir, "/", stem, ".crt").c_str(), F_OK) == 0;
  };
  if (dir.empty()) {
    if (which.name.empty()) return Tls();
    return absl::InvalidArgumentError(
        absl::StrCat("--cert ", which.name, ": no TLS directory to find it in (--tls-dir)"));
  }
  std::string stem;
  if (!which.name.empty()) {
    stem = exists(which.name) ? which.name : "user-" + which.name;
    if (!exists(stem)) {
      return absl::NotFoundError(absl::StrCat("--cert ", which.name, ": neither ", which.name,
                                              ".crt nor user-", which.name, ".crt is in ", dir));
    }
  } else if (!which.none && exists("admin")) {
    stem = "admin";
  }
  absl::StatusOr<TlsFiles> files = LoadTls(dir, stem);
  if (!files.ok()) return files.status();
  return Tls(*std::move(files));
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const Tls& tls) {
  if (!tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = tls->ca_pem;
  options.pem_key_cert_pairs.push_back({tls->key_pem, tls->cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const Tls& tls) {
  if (!tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = tls->ca_pem;
  options.pem_private_key = tls->key_pem;
  options.pem_cert_chain = tls->cert_pem;
  return grpc::SslCredentials(options);
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, const Tls& tls,
                                           const std::string& server_name) {
  grpc::ChannelArguments args;
  // Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: it is also the deadline of each
  // connection attempt, which a TLS handshake to a busy server can exceed.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  ExpectServerName(tls, server_name, &args);
  return grpc::CreateCustomChannel(address, ChannelCredentials(tls), args);
}

std::shared_ptr<grpc::Channel> CoordinatorChannel(const std::string& address, const Tls& tls) {
  return MakeChannel(address, tls, kCoordinatorName);
}

void ExpectServerName(const Tls& tls, const std::string& server_name,
                      grpc::ChannelArguments* args) {
  if (tls) args->SetSslTargetNameOverride(server_name);
}

std::string ExplainTlsFailure(const std::string& address, bool tls, const std::string& grpc_message,
                              const std::string& server_name) {
  const Speaks speaks = Probe(address);
  if (tls && speaks == Speaks::kPlaintext) {
    return absl::StrCat(address,
                        " serves plaintext, not TLS: this side uses TLS (--tls-dir, "
                        "RINGMASTER_TLS_DIR or the files of `ringmaster up`); "
                        "--tls-dir \"\" speaks plaintext");
  }
  if (!tls && speaks == Speaks::kOther) {
    return absl::StrCat(address,
                        " requires TLS: give --tls-dir (or RINGMASTER_TLS_DIR) "
                        "the directory of `ringmaster certs init`");
  }
  if (absl::StrContains(grpc_message, "not in peer certificate")) {
    return absl::StrCat("the TLS certificate of ", address, " does not name ", server_name,
                        ": it is another identity of this cluster's CA (a worker's key "
                        "cannot serve as the coordinator), or a certificate made before "
                        "identities were checked (reissue it: ringmaster certs init)");
  }
  if (absl::StrContains(grpc_message, "certificate verify failed") ||
      absl::StrContains(grpc_message, "CERTIFICATE_VERIFY_FAILED")) {
    return absl::StrCat("the TLS certificate of ", address,
                        " is not signed by this cluster's CA (ca.crt of --tls-dir)");
  }
  if (absl::StrContains(absl::AsciiStrToLower(grpc_message), "handshake") ||
      absl::StrContains(grpc_message, "alert")) {
    return absl::StrCat("the TLS handshake with ", address,
                        " failed; is --tls-dir this cluster's? (", grpc_message, ")");
  }
  return "";
}

}  // namespace ringmaster
