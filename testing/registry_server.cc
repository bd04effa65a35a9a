#include "testing/registry_server.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/net.h"

namespace ringmaster::testing {
namespace {

namespace fs = std::filesystem;

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

absl::Status Run(const std::string& what, const std::string& command_line) {
  CommandResult r = Shell(command_line);
  if (r.exit_code == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " failed (", r.exit_code, "): ", r.out, r.err));
}

// `path` of an image's files, under `root` on the host, its directory made.
fs::path PathUnder(const std::string& root, const std::string& path) {
  const fs::path target = fs::path(root) / fs::path(path).relative_path();
  fs::create_directories(target.parent_path());
  return target;
}

}  // namespace

std::string RegistryServer::Unavailable() {
  if (geteuid() != 0) return "needs root (buildah's storage, as ./dev test runs)";
  for (const char* tool :
       {"docker-registry", "buildah", "skopeo", "umoci", "htpasswd", "openssl", "curl"}) {
    if (Shell(absl::StrCat("command -v ", tool)).exit_code != 0) {
      return absl::StrCat(tool,
                          " is not installed (Debian packages docker-registry buildah skopeo "
                          "umoci apache2-utils openssl curl; ./dev installs them)");
    }
  }
  return "";
}

absl::StatusOr<std::unique_ptr<RegistryServer>> RegistryServer::Start(const std::string& dir,
                                                                      const std::string& user,
                                                                      const std::string& password) {
  absl::StatusOr<int> port = PickFreePort("127.0.0.1");
  if (!port.ok()) return port.status();
  const std::string address = absl::StrCat("127.0.0.1:", *port);
  const std::string certs = absl::StrCat(dir, "/certs/", address);
  fs::create_directories(certs);
  const std::string d = Quote(dir);
  absl::Status made =
      Run("making the registry's certificate and password",
          absl::StrCat("cd ", d,
                       " && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt "
                       "-days 2 -subj /CN=registry-test-ca 2>/dev/null"
                       " && openssl req -newkey rsa:2048 -nodes -keyout registry.key -out "
                       "registry.csr -subj /CN=localhost 2>/dev/null"
                       " && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san.ext"
                       " && openssl x509 -req -in registry.csr -CA ca.crt -CAkey ca.key "
                       "-CAcreateserial -out registry.crt -days 2 -extfile san.ext 2>/dev/null"
                       " && cp ca.crt ",
                       Quote(certs), "/ca.crt && htpasswd -Bbn ", Quote(user), " ", Quote(password),
                       " > htpasswd"));
  if (!made.ok()) return made;
  std::ofstream(dir + "/config.yml")
      << "version: 0.1\nlog: {level: warn}\n"
      << "storage:\n  filesystem: {rootdirectory: " << dir << "/data}\n  delete: {enabled: true}\n"
      << "http:\n  addr: " << address << "\n  tls: {certificate: " << dir
      << "/registry.crt, key: " << dir << "/registry.key}\n"
      << "auth:\n  htpasswd: {realm: test, path: " << dir << "/htpasswd}\n";
  auto process = std::make_unique<BackgroundProcess>(
      std::vector<std::string>{"docker-registry", "serve", dir + "/config.yml"},
      std::map<std::string, std::string>{}, dir + "/registry.log");
  if (!process->started()) return absl::FailedPreconditionError("cannot start docker-registry");
  // /v2/ answers 401 without credentials once it serves.
  const std::string ping = absl::StrCat("curl -s -o /dev/null -w '%{http_code}' --cacert ",
                                        Quote(dir + "/ca.crt"), " https://", address, "/v2/");
  if (!WaitFor([&] { return Shell(ping).out == "401"; }, absl::Seconds(30))) {
    return absl::DeadlineExceededError(
        absl::StrCat("docker-registry never answered: ", process->output()));
  }
  return std::unique_ptr<RegistryServer>(
      new RegistryServer(dir, address, user, password, std::move(process)));
}

std::string RegistryServer::WriteAuthFile(const std::string& path, const std::string& user,
                                          const std::string& password) const {
  std::ofstream(path) << "{\"auths\": {\"" << address_ << "\": {\"auth\": \""
                      << absl::Base64Escape(absl::StrCat(user, ":", password)) << "\"}}}\n";
  return path;
}

absl::Status RegistryServer::PushRootfs(const std::string& name, const std::string& rootfs,
                                        const std::map<std::string, std::string>& replaced) const {
  const std::string over = absl::StrCat(dir_, "/replaced-", std::hash<std::string>()(name));
  fs::remove_all(over);
  fs::create_directories(over);
  for (const auto& [path, contents] : replaced) std::ofstream(PathUnder(over, path)) << contents;
  const std::string buildah =
      absl::StrCat("buildah --root ", Quote(dir_ + "/storage"), " --runroot ", Quote(dir_ + "/run"),
                   " --storage-driver vfs");
  const std::string image = absl::StrCat(address_, "/", name);
  return Run(absl::StrCat("building and pushing ", image),
             absl::StrCat(
                 "set -e; c=$(", buildah, " from scratch); m=$(", buildah, " mount \"$c\"); cp -a ",
                 Quote(rootfs), "/. \"$m\"/; cp -r ", Quote(over), "/. \"$m\"/; ", buildah,
                 " config --entrypoint '[\"/bin/false\"]' \"$c\"; ", buildah, " commit -q \"$c\" ",
                 Quote(image), " >/dev/null; ", buildah, " rm \"$c\" >/dev/null; ", buildah,
                 " push -q --cert-dir ", Quote(dir_ + "/certs/" + address_), " --creds ",
                 Quote(user_ + ":" + password_), " ", Quote(image), " docker://", Quote(image)));
}

absl::Status RegistryServer::Push(const std::string& name,
                                  const std::map<std::string, std::string>& files) const {
  const std::string rootfs = absl::StrCat(dir_, "/rootfs-", fs::path(name).filename().string(), "-",
                                          std::hash<std::string>()(name));
  fs::remove_all(rootfs);
  for (const auto& [path, contents] : files) {
    const fs::path target = PathUnder(rootfs, path);
    if (absl::EndsWith(path, "*")) {
      const fs::path to = target.parent_path() / target.filename().string().substr(
                                                     0, target.filename().string().size() - 1);
      std::error_code error;
      fs::copy(contents, to, fs::copy_options::recursive | fs::copy_options::copy_symlinks, error);
      if (error)
        return absl::InternalError(absl::StrCat("copying ", contents, ": ", error.message()));
    } else {
      std::ofstream(target) << contents;
    }
  }
  return PushRootfs(name, rootfs);
}

}  // namespace ringmaster::testing
