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

// Events (nvmlEventSetWait_v2).
using EventSet = void*;
struct EventData {
  Device device;
  unsigned long long event_type;
  unsigned long long event_data;  // the XID of an XID event; 999: unknown
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
constexpr unsigned long long kEventDoubleBitEcc = 0x2;  // nvmlEventTypeDoubleBitEccError
constexpr unsigned long long kEventXidCritical = 0x8;   // nvmlEventTypeXidCriticalError
constexpr int kErrorTimeout = 10;                       // NVML_ERROR_TIMEOUT
constexpr int kErrorInsufficientSize = 7;               // NVML_ERROR_INSUFFICIENT_SIZE
constexpr int kRetiredForMultipleSingleBitEcc = 0;      // nvmlPageRetirementCause_t
constexpr int kRetiredForDoubleBitEcc = 1;

}  // namespace ringmaster::nvml_abi

#endif  // RINGMASTER_WORKER_NVML_ABI_H_
