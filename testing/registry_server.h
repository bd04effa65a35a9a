// A real OCI registry for a test: Debian's docker-registry (the CNCF
// distribution) on a free loopback port, with TLS from a CA of the test's
// own and htpasswd (bcrypt) credentials, and images built with buildah
// and pushed to it.
#ifndef RINGMASTER_TESTING_REGISTRY_SERVER_H_
#define RINGMASTER_TESTING_REGISTRY_SERVER_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "testing/test_util.h"

namespace ringmaster::testing {

class RegistryServer {
 public:
  // Why a registry cannot be had here (not root, or a tool missing), or
  // empty.
  static std::string Unavailable();
  // Its files in `dir`; the user `user` with `password`. Returns once it
  // answers; stopped with the object.
  static absl::StatusOr<std::unique_ptr<RegistryServer>> Start(const std::string& dir,
                                                               const std::string& user,
                                                               const std::string& password);

  // "127.0.0.1:<port>"
  const std::string& address() const { return address_; }
  // <dir>/certs: <address>/ca.crt, as a worker's --registry-certs takes.
  std::string certs_dir() const { return dir_ + "/certs"; }
  // An auth.json with `user` and `password` for this registry.
  std::string WriteAuthFile(const std::string& path, const std::string& user,
                            const std::string& password) const;

  // Builds an image of `files` (path in the image -> contents; a path
  // ending in '*' is a copy of the host file or directory named by the
  // contents) with buildah, and pushes it as <address>/<name>.
  absl::Status Push(const std::string& name, const std::map<std::string, std::string>& files) const;
  // Pushes a root filesystem directory, with `replaced` (path in the image
  // -> contents) written over it.
  absl::Status PushRootfs(const std::string& name, const std::string& rootfs,
                          const std::map<std::string, std::string>& replaced = {}) const;

 private:
  RegistryServer(std::string dir, std::string address, std::string user, std::string password,
                 std::unique_ptr<BackgroundProcess> process)
      : dir_(std::move(dir)),
        address_(std::move(address)),
        user_(std::move(user)),
        password_(std::move(password)),
        process_(std::move(process)) {}

  std::string dir_;
  std::string address_;
  std::string user_, password_;
  std::unique_ptr<BackgroundProcess> process_;
};

}  // namespace ringmaster::testing

#endif  // RINGMASTER_TESTING_REGISTRY_SERVER_H_
