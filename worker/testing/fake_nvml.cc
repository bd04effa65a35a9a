// A stand-in for libnvidia-ml.so.1 with set values, for tests of the
// worker's GPU discovery and metrics on machines without a GPU. The devices
// come from FAKE_NVML_DEVICES: "uuid:util%:mem_used:mem_total:power_mW:
// temp_C:sm_MHz[:uncorrected_ECC_errors]" entries separated by ';' (without
// the last field, the device has no ECC). Device i sits at PCI bus id
// 0000:<i in hex>:00.0. Every device's links come from FAKE_NVML_LINKS:
// "nvlink:<nvmlNvlinkVersion_t>:<active links>" or "pcie:<generation>:
// <width>"; without it, NVML cannot tell.
//
// Errors are injected through the file FAKE_NVML_CONTROL names: a test
// appends lines, read as NVML is called. "xid <gpu> <xid>" delivers an XID
// event; "ecc <gpu> <count>" sets the GPU's uncorrectable ECC errors (and
// delivers a double-bit ECC event); "retired <gpu> <pages>" sets its
// retired pages (0 before). "{pid}" in the name stands for the process's
// id, so that each worker of a local cluster has a file of its own.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "worker/nvml_abi.h"

namespace {

struct Device {
  std::string uuid;
  unsigned util = 0;
  unsigned long long used = 0, total = 0;
  unsigned power = 0, temp = 0, clock = 0;
  long long ecc_errors = -1;  // -1: no ECC
  unsigned retired_pages = 0;
};

std::vector<Device> ParseDevices() {
  std::vector<Device> devices;
  const char* spec = std::getenv("FAKE_NVML_DEVICES");
  std::string rest = spec ? spec : "";
  while (!rest.empty()) {
    const size_t end = rest.find(';');
    const std::string item = rest.substr(0, end);
    rest = end == std::string::npos ? "" : rest.substr(end + 1);
    char uuid[64] = {};
    Device d;
    if (std::sscanf(item.c_str(), "%63[^:]:%u:%llu:%llu:%u:%u:%u:%lld", uuid, &d.util, &d.used,
                    &d.total, &d.power, &d.temp, &d.clock, &d.ecc_errors) >= 7) {
      d.uuid = uuid;
      devices.push_back(d);
    }
  }
  return devices;
}

// Destroyed with the library when it is unloaded.
std::vector<Device>& Devices() {
  static std::vector<Device> devices = ParseDevices();
  return devices;
}

using ringmaster::nvml_abi::EventData;
using ringmaster::nvml_abi::Memory;
using ringmaster::nvml_abi::Utilization;

Device* At(void* handle) { return static_cast<Device*>(handle); }

// What FAKE_NVML_CONTROL has said so far. The worker's threads call in at
// once (scrapes, heartbeats, its event wait).
struct Control {
  std::mutex mu;
  std::streamoff read = 0;  // of the file
  std::deque<EventData> events;
};

// Destroyed with the library when it is unloaded, as Devices() is.
Control& TheControl() {
  static Control control;
  return control;
}

// Applies the lines appended since the last call; with control.mu held.
void ReadControl(Control& control) {
  const char* name = std::getenv("FAKE_NVML_CONTROL");
  if (name == nullptr) return;
  std::string path = name;
  if (const size_t at = path.find("{pid}"); at != std::string::npos) {
    path.replace(at, 5, std::to_string(getpid()));
  }
  std::ifstream in(path);
  in.seekg(control.read);
  std::string line;
  while (std::getline(in, line) && !in.eof()) {
    control.read = in.tellg();
    char kind[16] = {};
    unsigned gpu = 0;
    long long value = 0;
    if (std::sscanf(line.c_str(), "%15s %u %lld", kind, &gpu, &value) != 3 ||
        gpu >= Devices().size()) {
      continue;
    }
    Device& device = Devices()[gpu];
    const std::string what = kind;
    if (what == "xid") {
      control.events.push_back({&device, ringmaster::nvml_abi::kEventXidCritical,
                                static_cast<unsigned long long>(value), 0xFFFFFFFF, 0xFFFFFFFF});
    } else if (what == "ecc") {
      device.ecc_errors = value;
      control.events.push_back(
          {&device, ringmaster::nvml_abi::kEventDoubleBitEcc, 0, 0xFFFFFFFF, 0xFFFFFFFF});
    } else if (what == "retired") {
      device.retired_pages = static_cast<unsigned>(value);
    }
  }
}

// Holds the control's mutex, having applied what it says: ECC counts and
// retired pages are read under it.
class Controlled {
 public:
  Controlled() : lock_(TheControl().mu) { ReadControl(TheControl()); }

 private:
  std::lock_guard<std::mutex> lock_;
};

}  // namespace

extern "C" {

int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }
int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = static_cast<unsigned int>(Devices().size());
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index >= Devices().size()) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = &Devices()[index];
  return 0;
}
int nvmlDeviceGetUtilizationRates(void* d, Utilization* u) {
  u->gpu = At(d)->util;
  u->memory = 0;
  return 0;
}
int nvmlDeviceGetMemoryInfo(void* d, Memory* m) {
  m->total = At(d)->total;
  m->used = At(d)->used;
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetPowerUsage(void* d, unsigned int* milliwatts) {
  *milliwatts = At(d)->power;
  return 0;
}
int nvmlDeviceGetTemperature(void* d, unsigned int, unsigned int* celsius) {
  *celsius = At(d)->temp;
  return 0;
}
int nvmlDeviceGetClockInfo(void* d, unsigned int, unsigned int* mhz) {
  *mhz = At(d)->clock;
  return 0;
}
int nvmlDeviceGetTotalEccErrors(void* d, int error_type, int counter_type,
                                unsigned long long* count) {
  Controlled controlled;
  if (At(d)->ecc_errors < 0) return 3;  // NVML_ERROR_NOT_SUPPORTED
  if (error_type != ringmaster::nvml_abi::kMemoryErrorUncorrected ||
      counter_type != ringmaster::nvml_abi::kVolatileEcc) {
    return 2;  // the worker asks for nothing else
  }
  *count = static_cast<unsigned long long>(At(d)->ecc_errors);
  return 0;
}
int nvmlDeviceGetUUID(void* d, char* out, unsigned int length) {
  std::snprintf(out, length, "%s", At(d)->uuid.c_str());
  return 0;
}
int nvmlDeviceGetName(void*, char* out, unsigned int length) {
  std::snprintf(out, length, "Fake GPU");
  return 0;
}

constexpr int kNotSupported = 3;  // NVML_ERROR_NOT_SUPPORTED
constexpr int kNotFound = 6;      // NVML_ERROR_NOT_FOUND

int nvmlDeviceGetHandleByPciBusId_v2(const char* id, void** device) {
  unsigned domain = 0, bus = 0, slot = 0, function = 0;
  if (std::sscanf(id, "%x:%x:%x.%x", &domain, &bus, &slot, &function) != 4 ||
      bus >= Devices().size()) {
    return kNotFound;
  }
  *device = &Devices()[bus];
  return 0;
}

// The FAKE_NVML_LINKS kind ("nvlink" or "pcie") and its two numbers.
bool Links(const char* kind, unsigned* first, unsigned* second) {
  const char* spec = std::getenv("FAKE_NVML_LINKS");
  char found[16] = {};
  return spec != nullptr && std::sscanf(spec, "%15[^:]:%u:%u", found, first, second) == 3 &&
         std::strcmp(found, kind) == 0;
}

int nvmlDeviceGetNvLinkState(void*, unsigned int link, unsigned int* active) {
  unsigned version = 0, links = 0;
  if (!Links("nvlink", &version, &links)) return kNotSupported;
  *active = link < links ? 1 : 0;
  return 0;
}
int nvmlDeviceGetNvLinkVersion(void*, unsigned int, unsigned int* version) {
  unsigned links = 0;
  return Links("nvlink", version, &links) ? 0 : kNotSupported;
}
int nvmlDeviceGetCurrPcieLinkGeneration(void*, unsigned int* generation) {
  unsigned width = 0;
  return Links("pcie", generation, &width) ? 0 : kNotSupported;
}
int nvmlDeviceGetCurrPcieLinkWidth(void*, unsigned int* width) {
  unsigned generation = 0;
  return Links("pcie", &generation, width) ? 0 : kNotSupported;
}

int nvmlDeviceGetRetiredPages(void* d, int cause, unsigned int* count, unsigned long long*) {
  Controlled controlled;
  // Every page counts as retired for double-bit errors.
  *count = cause == ringmaster::nvml_abi::kRetiredForDoubleBitEcc ? At(d)->retired_pages : 0;
  return 0;
}

int nvmlEventSetCreate(void** set) {
  *set = &TheControl();
  return 0;
}
int nvmlDeviceRegisterEvents(void*, unsigned long long, void*) { return 0; }
int nvmlEventSetFree(void*) { return 0; }
int nvmlEventSetWait_v2(void* set, EventData* data, unsigned int timeout_ms) {
  Control& control = *static_cast<Control*>(set);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(control.mu);
      ReadControl(control);
      if (!control.events.empty()) {
        *data = control.events.front();
        control.events.pop_front();
        return 0;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return ringmaster::nvml_abi::kErrorTimeout;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // extern "C"
