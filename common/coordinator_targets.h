// The coordinators a client may call ("a:7070,b:7070": --coordinator and
// RINGMASTER_COORDINATOR take several), and which one it calls now. Only
// the leader takes changes; a standby refuses them with UNAVAILABLE "not
// the leader: the leader is at ADDRESS", and a coordinator that is down
// cannot be reached. After either, Follow moves to the leader named, or to
// the next address, so that the call can be made again there. A leader
// named is followed only where the credentials a call carries are safe:
// with TLS (the channel checks that its certificate names the
// coordinator), or to one of the addresses given.
#ifndef RINGMASTER_COMMON_COORDINATOR_TARGETS_H_
#define RINGMASTER_COMMON_COORDINATOR_TARGETS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/time/time.h"
#include "common/mutex.h"
#include "common/tls.h"

namespace ringmaster {

// How a standby's refusal names the leader: "... the leader is at ADDRESS".
inline constexpr char kLeaderIsAt[] = "the leader is at ";

// The addresses of a comma-separated list, blanks dropped.
std::vector<std::string> SplitAddresses(const std::string& list);
// The leader's address in a standby's refusal; empty when it names none.
std::string LeaderNamedIn(const std::string& message);

// Thread-safe.
class CoordinatorTargets {
 public:
  using MakeChannel = std::function<std::shared_ptr<grpc::Channel>(const std::string& address)>;
  // `make_channel` makes each address's channel (default: CoordinatorChannel).
  CoordinatorTargets(const std::string& list, Tls tls, MakeChannel make_channel = nullptr);

  struct Target {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
  };
  // The coordinator to call now. With several addresses, it waits (up to
  // `connect_timeout`) for a connection, so that a coordinator that accepts
  // connections but does not answer (stopped) is passed over by Follow.
  Target Current(absl::Duration connect_timeout = absl::Seconds(2));

  // After a call to `used` failed with `status`: false when the call
  // should not be made again (its answer stands, or `deadline` passed);
  // else true, once the next target is chosen (and, after a whole round
  // with none answering, a short pause). An `idempotent` call that ran out
  // of time, or was cancelled by its server, is made again elsewhere too:
  // its coordinator may be paused, or a standby turning leader.
  bool Follow(const grpc::Status& status, const std::string& used, absl::Time deadline,
              bool idempotent = false);

  // Makes `call` on the coordinator to call now, and again wherever Follow
  // sends it, until it succeeds or Follow says to stop. Returns its last
  // status, and in `*used` the address that gave it.
  grpc::Status Call(absl::Time deadline, bool idempotent,
                    const std::function<grpc::Status(const Target&)>& call,
                    std::string* used = nullptr);

  bool several() const { return addresses_.size() > 1; }

 private:
  std::shared_ptr<grpc::Channel> ChannelLocked(const std::string& address)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::vector<std::string> addresses_;
  const Tls tls_;
  const MakeChannel make_channel_;
  Mutex mu_;
  std::string current_ ABSL_GUARDED_BY(mu_);
  int misses_ ABSL_GUARDED_BY(mu_) = 0;  // follows since one answered
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_COORDINATOR_TARGETS_H_
