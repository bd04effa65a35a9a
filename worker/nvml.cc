#include "worker/nvml.h"

#include <dlfcn.h>

#include <iterator>

#include "absl/strings/str_cat.h"
#include "worker/nvml_abi.h"

namespace ringmaster {

using nvml_abi::Device;
using nvml_abi::kClockSm;
using nvml_abi::kTemperatureGpu;
using nvml_abi::Memory;
using nvml_abi::Utilization;

struct Nvml::Api {
  int (*init)();
  int (*shutdown)();
  int (*device_count)(unsigned int*);
  int (*handle_by_index)(unsigned int, Device*);
  int (*utilization)(Device, Utilization*);
  int (*memory)(Device, Memory*);
  int (*power)(Device, unsigned int*);
  int (*temperature)(Device, unsigned int, unsigned int*);
  int (*clock)(Device, unsigned int, unsigned int*);
  int (*uuid)(Device, char*, unsigned int);
  int (*name)(Device, char*, unsigned int);
  // Optional: GPUs without ECC answer NOT_SUPPORTED, older NVMLs lack it.
  int (*ecc_errors)(Device, int, int, unsigned long long*);
  // Optional: only Link() uses them.
  int (*handle_by_pci_bus_id)(const char*, Device*);
  int (*nvlink_state)(Device, unsigned int, unsigned int*);
  int (*nvlink_version)(Device, unsigned int, unsigned int*);
  int (*pcie_generation)(Device, unsigned int*);
  int (*pcie_width)(Device, unsigned int*);
  // Optional: page retirement and events.
  int (*retired_pages)(Device, int, unsigned int*, unsigned long long*);
  int (*event_set_create)(nvml_abi::EventSet*);
  int (*register_events)(Device, unsigned long long, nvml_abi::EventSet);
  int (*event_set_wait)(nvml_abi::EventSet, nvml_abi::EventData*, unsigned int);
  int (*event_set_free)(nvml_abi::EventSet);
};

double NvlinkGbPerSecond(unsigned version) {
  switch (version) {
    case 1:
      return 20;  // 1.0
    case 2:       // 2.0
    case 3:       // 2.2
    case 4:       // 3.0
    case 5:       // 3.1
    case 6:
      return 25;  // 4.0
    case 7:
      return 50;  // 5.0
    default:
      return 0;
  }
}

double PcieLaneGbPerSecond(unsigned generation) {
  static constexpr double kLane[] = {0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.563};
  return generation < std::size(kLane) ? kLane[generation] : 0;
}

absl::StatusOr<std::unique_ptr<Nvml>> Nvml::Load(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot load ", library, ": ", dlerror()));
  }
  auto api = std::make_unique<Api>();
  struct Symbol {
    const char* name;
    void** slot;
  };
  const Symbol symbols[] = {
      {"nvmlInit_v2", reinterpret_cast<void**>(&api->init)},
      {"nvmlShutdown", reinterpret_cast<void**>(&api->shutdown)},
      {"nvmlDeviceGetCount_v2", reinterpret_cast<void**>(&api->device_count)},
      {"nvmlDeviceGetHandleByIndex_v2", reinterpret_cast<void**>(&api->handle_by_index)},
      {"nvmlDeviceGetUtilizationRates", reinterpret_cast<void**>(&api->utilization)},
      {"nvmlDeviceGetMemoryInfo", reinterpret_cast<void**>(&api->memory)},
      {"nvmlDeviceGetPowerUsage", reinterpret_cast<void**>(&api->power)},
      {"nvmlDeviceGetTemperature", reinterpret_cast<void**>(&api->temperature)},
      {"nvmlDeviceGetClockInfo", reinterpret_cast<void**>(&api->clock)},
      {"nvmlDeviceGetUUID", reinterpret_cast<void**>(&api->uuid)},
      {"nvmlDeviceGetName", reinterpret_cast<void**>(&api->name)},
  };
  for (const Symbol& s : symbols) {
    *s.slot = dlsym(handle, s.name);
    if (*s.slot == nullptr) {
      dlclose(handle);
      return absl::UnavailableError(absl::StrCat(library, " lacks ", s.name));
    }
  }
  const Symbol optional[] = {
      {"nvmlDeviceGetTotalEccErrors", reinterpret_cast<void**>(&api->ecc_errors)},
      {"nvmlDeviceGetHandleByPciBusId_v2", reinterpret_cast<void**>(&api->handle_by_pci_bus_id)},
      {"nvmlDeviceGetNvLinkState", reinterpret_cast<void**>(&api->nvlink_state)},
      {"nvmlDeviceGetNvLinkVersion", reinterpret_cast<void**>(&api->nvlink_version)},
      {"nvmlDeviceGetCurrPcieLinkGeneration", reinterpret_cast<void**>(&api->pcie_generation)},
      {"nvmlDeviceGetCurrPcieLinkWidth", reinterpret_cast<void**>(&api->pcie_width)},
      {"nvmlDeviceGetRetiredPages", reinterpret_cast<void**>(&api->retired_pages)},
      {"nvmlEventSetCreate", reinterpret_cast<void**>(&api->event_set_create)},
      {"nvmlDeviceRegisterEvents", reinterpret_cast<void**>(&api->register_events)},
      {"nvmlEventSetWait_v2", reinterpret_cast<void**>(&api->event_set_wait)},
      {"nvmlEventSetFree", reinterpret_cast<void**>(&api->event_set_free)},
  };
  for (const Symbol& s : optional) *s.slot = dlsym(handle, s.name);
  if (int rc = api->init(); rc != 0) {
    dlclose(handle);
    return absl::UnavailableError(absl::StrCat("nvmlInit_v2 returned ", rc));
  }
  std::unique_ptr<Nvml> nvml(new Nvml);
  nvml->handle_ = handle;
  nvml->api_ = std::move(api);
  return nvml;
}

Nvml::~Nvml() {
  if (event_set_ != nullptr) api_->event_set_free(event_set_);
  if (api_) api_->shutdown();
  if (handle_ != nullptr) dlclose(handle_);
}

std::vector<GpuSample> Nvml::Sample() {
  std::vector<GpuSample> samples;
  unsigned int count = 0;
  if (api_->device_count(&count) != 0) return samples;
  for (unsigned int i = 0; i < count; ++i) {
    Device device = nullptr;
    if (api_->handle_by_index(i, &device) != 0) continue;
    GpuSample s;
    s.index = static_cast<int>(i);
    char text[96] = {};
    if (api_->uuid(device, text, sizeof(text)) == 0) s.uuid = text;
    char name[96] = {};
    if (api_->name(device, name, sizeof(name)) == 0) s.name = name;
    Utilization utilization{};
    if (api_->utilization(device, &utilization) == 0) s.utilization_ratio = utilization.gpu / 100.0;
    Memory memory{};
    if (api_->memory(device, &memory) == 0) {
      s.memory_used_bytes = static_cast<double>(memory.used);
      s.memory_total_bytes = static_cast<double>(memory.total);
    }
    unsigned int value = 0;
    if (api_->power(device, &value) == 0) s.power_watts = value / 1000.0;  // milliwatts
    if (api_->temperature(device, kTemperatureGpu, &value) == 0) s.temperature_celsius = value;
    if (api_->clock(device, kClockSm, &value) == 0) s.sm_clock_hertz = value * 1e6;  // MHz
    unsigned long long errors = 0;
    if (api_->ecc_errors != nullptr && api_->ecc_errors(device, nvml_abi::kMemoryErrorUncorrected,
                                                        nvml_abi::kVolatileEcc, &errors) == 0) {
      s.uncorrected_ecc_errors = static_cast<double>(errors);
    }
    if (api_->retired_pages != nullptr) {
      double retired = 0;
      bool known = true;
      for (int cause :
           {nvml_abi::kRetiredForMultipleSingleBitEcc, nvml_abi::kRetiredForDoubleBitEcc}) {
        unsigned int pages = 0;  // 0: count them without their addresses
        const int rc = api_->retired_pages(device, cause, &pages, nullptr);
        known &= rc == 0 || rc == nvml_abi::kErrorInsufficientSize;
        retired += pages;
      }
      if (known) s.retired_pages = retired;
    }
    samples.push_back(std::move(s));
  }
  return samples;
}

absl::Status Nvml::WatchEvents() {
  if (api_->event_set_create == nullptr || api_->register_events == nullptr ||
      api_->event_set_wait == nullptr || api_->event_set_free == nullptr) {
    return absl::UnavailableError("NVML lacks the event API (nvmlEventSetWait_v2)");
  }
  if (event_set_ != nullptr) return absl::OkStatus();
  if (int rc = api_->event_set_create(&event_set_); rc != 0) {
    event_set_ = nullptr;
    return absl::UnavailableError(absl::StrCat("nvmlEventSetCreate returned ", rc));
  }
  unsigned int count = 0;
  if (api_->device_count(&count) != 0) count = 0;
  int registered = 0;
  for (unsigned int i = 0; i < count; ++i) {
    Device device = nullptr;
    if (api_->handle_by_index(i, &device) != 0) continue;
    // A GPU without ECC refuses the ECC event: then XIDs alone.
    for (unsigned long long types : {nvml_abi::kEventXidCritical | nvml_abi::kEventDoubleBitEcc,
                                     nvml_abi::kEventXidCritical}) {
      if (api_->register_events(device, types, event_set_) == 0) {
        ++registered;
        break;
      }
    }
  }
  if (registered == 0 && count > 0) {
    return absl::UnavailableError("no GPU accepted NVML's XID events");
  }
  return absl::OkStatus();
}

std::optional<GpuEvent> Nvml::WaitEvent(absl::Duration timeout) {
  if (event_set_ == nullptr) return std::nullopt;
  nvml_abi::EventData data{};
  const auto ms = static_cast<unsigned int>(absl::ToInt64Milliseconds(timeout));
  if (api_->event_set_wait(event_set_, &data, ms) != 0) return std::nullopt;  // or a timeout
  GpuEvent event;
  unsigned int count = 0;
  if (api_->device_count(&count) == 0) {
    for (unsigned int i = 0; i < count; ++i) {
      Device device = nullptr;
      if (api_->handle_by_index(i, &device) == 0 && device == data.device) {
        event.index = static_cast<int>(i);
        char text[96] = {};
        if (api_->uuid(device, text, sizeof(text)) == 0) event.uuid = text;
      }
    }
  }
  if (data.event_type & nvml_abi::kEventXidCritical) {
    event.xid = static_cast<int>(data.event_data);
  } else {
    event.double_bit_ecc = (data.event_type & nvml_abi::kEventDoubleBitEcc) != 0;
  }
  return event;
}

absl::StatusOr<GpuLink> Nvml::Link(const std::string& pci_bus_id) {
  if (api_->handle_by_pci_bus_id == nullptr) {
    return absl::UnavailableError("NVML lacks nvmlDeviceGetHandleByPciBusId_v2");
  }
  Device device = nullptr;
  if (int rc = api_->handle_by_pci_bus_id(pci_bus_id.c_str(), &device); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("NVML knows no GPU at PCI bus id ", pci_bus_id, " (error ", rc, ")"));
  }
  int links = 0;
  unsigned version = 0;
  if (api_->nvlink_state != nullptr && api_->nvlink_version != nullptr) {
    for (unsigned link = 0; link < nvml_abi::kMaxNvlinks; ++link) {
      unsigned active = 0;
      if (api_->nvlink_state(device, link, &active) != 0 || !active) continue;
      if (api_->nvlink_version(device, link, &version) == 0) ++links;
    }
  }
  if (links > 0 && NvlinkGbPerSecond(version) > 0) {
    static constexpr const char* kName[] = {"", "1.0", "2.0", "2.2", "3.0", "3.1", "4.0", "5.0"};
    return GpuLink{absl::StrCat("NVLink ", kName[version], " x", links),
                   links * NvlinkGbPerSecond(version)};
  }
  unsigned generation = 0, width = 0;
  if (api_->pcie_generation == nullptr || api_->pcie_width == nullptr ||
      api_->pcie_generation(device, &generation) != 0 || api_->pcie_width(device, &width) != 0 ||
      PcieLaneGbPerSecond(generation) == 0) {
    return absl::UnavailableError(absl::StrCat("NVML cannot tell the links of GPU ", pci_bus_id));
  }
  return GpuLink{absl::StrCat("PCIe ", generation, " x", width),
                 width * PcieLaneGbPerSecond(generation)};
}

}  // namespace ringmaster
