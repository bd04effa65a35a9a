#include "worker/nvml.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "worker/nvml_abi.h"

namespace ringmaster {

using nvml_abi::Device;
using nvml_abi::Memory;
using nvml_abi::Utilization;
using nvml_abi::kClockSm;
using nvml_abi::kTemperatureGpu;

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
};

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
    samples.push_back(std::move(s));
  }
  return samples;
}

}  // namespace ringmaster
