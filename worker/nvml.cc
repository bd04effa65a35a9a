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
    samples.push_back(std::move(s));
  }
  return samples;
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
