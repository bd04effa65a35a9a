// Finds the GPUs this worker offers its ranks, through NVML: it creates no
// CUDA context, so the daemon holds no memory on any GPU and ranks can use
// GPUs in EXCLUSIVE_PROCESS mode.
#ifndef RINGMASTER_WORKER_GPU_DISCOVERY_H_
#define RINGMASTER_WORKER_GPU_DISCOVERY_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/cluster.pb.h"
#include "worker/nvml.h"

namespace ringmaster {

// Every device NVML lists, or, when `visible` (the worker's own
// CUDA_VISIBLE_DEVICES) is set, the devices it names in its order: NVML
// indices or UUIDs (or their prefixes), read as CUDA reads them, up to the
// first entry that names no device. When none is found, `why_none` says why.
std::vector<v1::Gpu> DiscoverGpus(Nvml& nvml, const std::optional<std::string>& visible,
                                  std::string* why_none);

// CUDA_VISIBLE_DEVICES for a rank given the GPUs of `indices` (NVML indices
// of `gpus`): their UUIDs, which name them whatever order CUDA enumerates
// devices in. NOT_FOUND naming the index this worker does not have.
absl::StatusOr<std::string> VisibleDevices(const std::vector<v1::Gpu>& gpus,
                                           const std::vector<int>& indices);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_GPU_DISCOVERY_H_
