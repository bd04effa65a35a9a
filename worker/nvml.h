// GPU telemetry through NVML, loaded with dlopen at run time so the worker
// runs (and reports no GPU series) where the NVIDIA driver is absent.
#ifndef RINGMASTER_WORKER_NVML_H_
#define RINGMASTER_WORKER_NVML_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringmaster {

struct GpuSample {
  int index = 0;
  std::string uuid;
  std::string name;
  double utilization_ratio = 0;  // 0..1, over NVML's last sample period
  double memory_used_bytes = 0;
  double memory_total_bytes = 0;
  double power_watts = 0;
  double temperature_celsius = 0;
  double sm_clock_hertz = 0;
  // Uncorrectable ECC memory errors since the driver loaded (NVML's
  // volatile count); -1 where NVML cannot tell (no ECC, or off).
  double uncorrected_ecc_errors = -1;
  // Pages of its memory retired for ECC errors, for good; -1 where NVML
  // cannot tell.
  double retired_pages = -1;
};

// An error NVML reported as an event: an XID, or a double-bit ECC error.
struct GpuEvent {
  int index = 0;
  std::string uuid;
  int xid = 0;  // 0 for an ECC event
  bool double_bit_ecc = false;
};

// The link a GPU reaches its peers through, and its bandwidth in one
// direction: what a ring all-reduce's bus bandwidth approaches at best.
struct GpuLink {
  std::string kind;  // "NVLink 4.0 x18", "PCIe 5 x16"
  double gb_per_second = 0;
};

// Per link (NVLink, by NVML's nvmlNvlinkVersion_t) or per lane (PCIe, by
// generation), one direction, GB/s; 0 for a value not known.
double NvlinkGbPerSecond(unsigned version);
double PcieLaneGbPerSecond(unsigned generation);

// Thread-safe as NVML is: the worker samples from its heartbeats and its
// scrapes, and waits for events on a thread of its own.
class Nvml {
 public:
  // Opens `library` (libnvidia-ml.so.1 by default) and initializes it.
  // UNAVAILABLE naming the library and the reason when it cannot.
  static absl::StatusOr<std::unique_ptr<Nvml>> Load(const std::string& library);
  ~Nvml();

  // One sample per device; a device whose query fails is left out.
  std::vector<GpuSample> Sample();

  // The GPU at `pci_bus_id` (as cudaDeviceGetPCIBusId writes it): its active
  // NVLinks when it has any, else its PCIe link. UNAVAILABLE when this NVML
  // cannot tell.
  absl::StatusOr<GpuLink> Link(const std::string& pci_bus_id);

  // Registers for every GPU's XID and double-bit ECC events. UNAVAILABLE
  // when this NVML cannot deliver them.
  absl::Status WatchEvents();
  // The next event, waiting at most `timeout`; nullopt when none came (or
  // WatchEvents did not succeed). One caller at a time.
  std::optional<GpuEvent> WaitEvent(absl::Duration timeout);

 private:
  struct Api;
  Nvml() = default;
  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
  void* event_set_ = nullptr;  // made by WatchEvents
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_NVML_H_
