// The pre-flight check a rank runs before an attempt's first step: a timed
// all-reduce on the job's real transport, through the same bootstrap as
// training, whose bus bandwidth the coordinator compares across the ranks
// (coordinator/preflight.h).
#ifndef RINGMASTER_TRAINER_PREFLIGHT_CHECK_H_
#define RINGMASTER_TRAINER_PREFLIGHT_CHECK_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "trainer/collective.h"

namespace ringmaster {

inline constexpr size_t kPreflightBytes = size_t{64} << 20;

// All-reduces `floats` floats at `buffer` (host memory for Gloo, device
// memory for NCCL) once to warm up and once timed, between barriers;
// returns the bus bandwidth in GB/s (nccl-tests' busbw: algbw * 2(n-1)/n;
// algbw for one rank).
absl::StatusOr<double> PreflightBusBandwidth(Collective* comm, float* buffer, size_t floats);

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_PREFLIGHT_CHECK_H_
