// NVML's C ABI, as far as the worker uses it: opaque device handles, the
// structs it fills, return code 0 for success. Shared by the loader
// (nvml.cc) and the fake library of the tests, so that both see one type
// for each function.
#ifndef RINGMASTER_WORKER_NVML_ABI_H_
#define RINGMASTER_WORKER_NVML_ABI_H_

namespace ringmaster::nvml_abi {

using Device = void*;
struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr unsigned kTemperatureGpu = 0;
constexpr unsigned kClockSm = 1;
constexpr int kMemoryErrorUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatileEcc = 0;             // NVML_VOLATILE_ECC: since the driver loaded
constexpr unsigned kMaxNvlinks = 18;        // NVML_NVLINK_MAX_LINKS

}  // namespace ringmaster::nvml_abi

#endif  // RINGMASTER_WORKER_NVML_ABI_H_
