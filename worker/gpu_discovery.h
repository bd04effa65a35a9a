// Finds this machine's GPUs through the CUDA runtime, loaded at run time so
// the worker runs where CUDA is absent.
#ifndef RINGMASTER_WORKER_GPU_DISCOVERY_H_
#define RINGMASTER_WORKER_GPU_DISCOVERY_H_

#include <string>
#include <vector>

#include "proto/cluster.pb.h"

namespace ringmaster {

// Empty when libcudart cannot be loaded or reports no usable device (for
// example "driver version is insufficient" on a machine without a GPU);
// `why_none` then says which.
std::vector<v1::Gpu> DiscoverGpus(std::string* why_none);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_GPU_DISCOVERY_H_
