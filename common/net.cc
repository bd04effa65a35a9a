#include "common/net.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"

namespace ringmaster {

namespace {

// Binds a socket at host:port (0: any) and releases it; the port it had.
absl::StatusOr<int> BindAndRelease(const std::string& host, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: ", host));
  }
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::string error = strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("bind ", host, ":", port, ": ", error));
  }
  close(fd);
  return ntohs(addr.sin_port);
}

// The first port of the kernel's ephemeral range; 32768 when unknown.
int EphemeralPortsFrom() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  return in >> low >> high && low > kLowestPickedPort ? low : 32768;
}

}  // namespace

absl::StatusOr<int> PickFreePort(const std::string& host) {
  // Below the ephemeral range, which the kernel draws from for binds to
  // port 0 and for outgoing connections: a port picked here stays free
  // until its daemon binds it, unless another picker draws the same one
  // at random.
  static const int ephemeral = EphemeralPortsFrom();
  thread_local std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> below(kLowestPickedPort, ephemeral - 1);
  for (int tries = 0; tries < 64 && ephemeral > kLowestPickedPort; ++tries) {
    const int port = below(random);
    absl::StatusOr<int> bound = BindAndRelease(host, port);
    if (bound.ok() || bound.status().code() == absl::StatusCode::kInvalidArgument) return bound;
  }
  return BindAndRelease(host, 0);
}

std::vector<int> PickFreePorts(int count, const std::string& host) {
  std::set<int> ports;
  for (int tries = 0; static_cast<int>(ports.size()) < count && tries < 4 * count; ++tries) {
    if (auto port = PickFreePort(host); port.ok()) ports.insert(*port);
  }
  return {ports.begin(), ports.end()};
}

std::string Hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

std::string HostOfAddress(const std::string& address) {
  if (!address.empty() && address[0] == '[') {
    return address.substr(1, address.find(']') - 1);
  }
  return address.substr(0, address.rfind(':'));
}

std::string AdvertisableHost(const std::string& bind_host) {
  if (bind_host.empty() || bind_host == "0.0.0.0" || bind_host == "::" || bind_host == "[::]") {
    return Hostname();
  }
  return bind_host;
}

absl::StatusOr<ServingAddresses> ResolveServingAddresses(const std::string& bind, int port,
                                                         const std::string& advertise) {
  ServingAddresses out;
  out.port = port;
  if (out.port == 0) {
    absl::StatusOr<int> free_port = PickFreePort(bind);
    if (!free_port.ok()) return free_port.status();
    out.port = *free_port;
  }
  out.listen = absl::StrCat(bind, ":", out.port);
  out.advertise =
      advertise.empty() ? absl::StrCat(AdvertisableHost(bind), ":", out.port) : advertise;
  return out;
}

}  // namespace ringmaster
