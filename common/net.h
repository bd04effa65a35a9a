// Small host networking helpers.
#ifndef RINGMASTER_COMMON_NET_H_
#define RINGMASTER_COMMON_NET_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster {

// A TCP port that was free on `host` a moment ago, drawn at random from
// kLowestPickedPort up to the kernel's ephemeral range (bound, read,
// closed): neither a bind to port 0 nor an outgoing connection takes it
// meanwhile. Another process may still draw it before the caller binds;
// callers that can bind port 0 themselves should.
inline constexpr int kLowestPickedPort = 10000;
absl::StatusOr<int> PickFreePort(const std::string& host = "0.0.0.0");

// Up to `count` distinct free ports.
std::vector<int> PickFreePorts(int count, const std::string& host = "0.0.0.0");

std::string Hostname();

// "host" of "host:port" (also "[v6]:port").
std::string HostOfAddress(const std::string& address);

// `host` unless it is a wildcard address, in which case this host's name.
std::string AdvertisableHost(const std::string& bind_host);

struct ServingAddresses {
  std::string listen;     // bind:port
  std::string advertise;  // what peers dial
  int port = 0;
};

// The addresses a daemon serves on, from its --bind, --port (0 picks a free
// port) and --advertise-address (empty: the bind host, or this host's name
// for a wildcard bind, at the port).
absl::StatusOr<ServingAddresses> ResolveServingAddresses(const std::string& bind, int port,
                                                         const std::string& advertise);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_NET_H_
