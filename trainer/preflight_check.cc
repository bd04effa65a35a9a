#include "trainer/preflight_check.h"

#include <algorithm>
#include <chrono>

#include "common/status_macros.h"

namespace ringmaster {

absl::StatusOr<double> PreflightBusBandwidth(Collective* comm, float* buffer, size_t floats) {
  // The warm-up connects what connects lazily; a small one suffices.
  RETURN_IF_ERROR(comm->AllReduceSum(buffer, std::min<size_t>(floats, 1 << 18)));
  RETURN_IF_ERROR(comm->Barrier());
  const auto start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(comm->AllReduceSum(buffer, floats));
  RETURN_IF_ERROR(comm->Barrier());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double algbw = static_cast<double>(floats * sizeof(float)) / std::max(seconds, 1e-9);
  const int n = comm->size();
  return (n > 1 ? algbw * 2.0 * (n - 1) / n : algbw) / 1e9;
}

}  // namespace ringmaster
