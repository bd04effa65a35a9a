// The pre-flight check a rank runs before an attempt's first step, on the
// job's real transport and through the same bootstrap as training:
//
//   1. Pairs of ranks (of different hosts, when there are several) time a
//      64 MB all-reduce between themselves, in
//      rounds ((0,1), (2,3)... then (1,2), (3,4)..., and for an odd count
//      (0,n-1)), so that every rank is timed against two different peers
//      when there are three or more. A rank's figure is its best pair's: a
//      bad link or host is slow in both of its pairs, a good one is fast in
//      at least one. (One all-reduce of the whole job takes the same time on
//      every rank and so cannot name the slow one; of two ranks, neither can
//      be named.)
//   2. The whole job times the same all-reduce, for the record.
//   3. The rank posts its figures and waits for the coordinator's verdict
//      (coordinator/health/preflight.h), which excludes a rank whose figure is under
//      half the job's median, or whose check failed.
#ifndef RINGMASTER_TRAINER_PREFLIGHT_CHECK_H_
#define RINGMASTER_TRAINER_PREFLIGHT_CHECK_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "domain/preflight_codec.h"
#include "trainer/collective.h"

namespace ringmaster {

inline constexpr size_t kPreflightBytes = size_t{64} << 20;

// All-reduces `floats` floats at `buffer` (host memory for Gloo, device
// memory for NCCL) once to warm up and once timed, between barriers;
// returns the bus bandwidth in GB/s (nccl-tests' busbw: algbw * 2(n-1)/n;
// algbw for one rank).
absl::StatusOr<double> PreflightBusBandwidth(Collective* comm, float* buffer, size_t floats);

// The peer of `rank` in pair round `round` (below kPreflightRounds) of a
// world of `size`, or -1 when it sits the round out.
inline constexpr int kPreflightRounds = 3;
int PreflightPartner(int rank, int size, int round);

// Where a rank runs: its host's index among the job's (GROUP_RANK) and its
// index on that host (LOCAL_RANK).
struct PreflightPlace {
  int group = 0;
  int local_rank = 0;
};

// Every rank's peer in `round` (-1: it sits the round out), given every
// rank's place. With two hosts or more, hosts pair as ranks do above, and
// local rank i of one meets local rank i of the other: the links between
// hosts are what is timed, not shared memory or NVLink within one. All on
// one host, rank meets rank.
std::vector<int> PreflightPeers(const std::vector<PreflightPlace>& places, int round);

// Connects `size` ranks, this one `rank`, on the job's transport, with
// their bootstrap keys under `prefix`.
using ConnectGroup = std::function<absl::StatusOr<std::unique_ptr<Collective>>(
    const std::string& prefix, int rank, int size)>;

// Steps 1 and 2 for the rank `world->rank()`, at `place`: its figures.
// The ranks first learn each other's places over `world`. `prefix` keeps
// the pairs' bootstrap keys apart from anything else in the store.
absl::StatusOr<PreflightReport> MeasurePreflight(Collective* world, PreflightPlace place,
                                                 const ConnectGroup& connect,
                                                 const std::string& prefix, float* buffer,
                                                 size_t floats);

// Where a rank posts its report and reads the verdict: the attempt's
// rendezvous scope.
class PreflightBoard {
 public:
  virtual ~PreflightBoard() = default;
  virtual absl::Status Post(const std::string& key, const std::string& value) = 0;
  // The value at `key` once it is set; DEADLINE_EXCEEDED after `timeout`.
  virtual absl::StatusOr<std::string> Await(const std::string& key, absl::Duration timeout) = 0;
};

struct PreflightOptions {
  absl::Duration verdict_timeout = absl::Minutes(5);
  absl::Duration poll = absl::Seconds(1);  // how often `stop_requested` is looked at
  std::function<bool()> stop_requested = [] { return false; };
  // Called with the rank's figures (or error) before they are posted.
  std::function<void(const PreflightReport&)> on_measured = [](const PreflightReport&) {};
};

// Measures, posts the report (or the measurement's error), and waits for
// the verdict: OK on "go"; otherwise an error with the verdict, the
// measurement's error, or CANCELLED once `stop_requested`.
absl::Status RunPreflight(Collective* world, PreflightPlace place, const ConnectGroup& connect,
                          PreflightBoard* board, float* buffer, size_t floats,
                          const PreflightOptions& options);

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_PREFLIGHT_CHECK_H_
