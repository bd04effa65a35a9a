#include "worker/gpu_discovery.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ringmaster {
namespace {

v1::Gpu GpuOf(const GpuSample& sample) {
  v1::Gpu gpu;
  gpu.set_index(sample.index);
  gpu.set_uuid(sample.uuid);
  gpu.set_name(sample.name);
  gpu.set_memory_total_bytes(static_cast<int64_t>(sample.memory_total_bytes));
  return gpu;
}

// The device an entry of CUDA_VISIBLE_DEVICES names: an index, or a UUID
// ("GPU-" and all or the start of the rest) that only one device starts with.
const GpuSample* Named(const std::vector<GpuSample>& devices, absl::string_view entry) {
  int index = 0;
  if (absl::SimpleAtoi(entry, &index)) {
    for (const GpuSample& d : devices) {
      if (d.index == index) return &d;
    }
    return nullptr;
  }
  if (!absl::StartsWith(entry, "GPU-")) return nullptr;
  const GpuSample* found = nullptr;
  for (const GpuSample& d : devices) {
    if (!absl::StartsWith(d.uuid, entry)) continue;
    if (found != nullptr) return nullptr;  // ambiguous
    found = &d;
  }
  return found;
}

}  // namespace

std::vector<v1::Gpu> DiscoverGpus(Nvml& nvml, const std::optional<std::string>& visible,
                                  std::string* why_none) {
  const std::vector<GpuSample> devices = nvml.Sample();
  std::vector<v1::Gpu> gpus;
  if (devices.empty()) {
    *why_none = "NVML lists no GPU";
    return gpus;
  }
  if (!visible.has_value()) {
    for (const GpuSample& d : devices) gpus.push_back(GpuOf(d));
    return gpus;
  }
  for (absl::string_view entry : absl::StrSplit(*visible, ',')) {
    const GpuSample* device = Named(devices, absl::StripAsciiWhitespace(entry));
    if (device == nullptr) break;
    const bool repeated = std::any_of(gpus.begin(), gpus.end(),
                                      [&](const v1::Gpu& g) { return g.index() == device->index; });
    if (repeated) break;
    gpus.push_back(GpuOf(*device));
  }
  if (gpus.empty()) {
    *why_none = absl::StrCat("CUDA_VISIBLE_DEVICES=\"", *visible, "\" names none of the ",
                             devices.size(), " GPUs NVML lists");
  }
  return gpus;
}

absl::StatusOr<std::string> VisibleDevices(const std::vector<v1::Gpu>& gpus,
                                           const std::vector<int>& indices) {
  std::vector<std::string> names;
  for (int index : indices) {
    auto gpu = std::find_if(gpus.begin(), gpus.end(),
                            [&](const v1::Gpu& g) { return g.index() == index; });
    if (gpu == gpus.end()) {
      std::vector<int> offered;
      for (const v1::Gpu& g : gpus) offered.push_back(g.index());
      return absl::NotFoundError(absl::StrCat(
          "GPU ", index, " was assigned but this worker offers ",
          offered.empty() ? "none" : absl::StrCat("GPUs ", absl::StrJoin(offered, ", "))));
    }
    names.push_back(gpu->uuid().empty() ? absl::StrCat(index) : gpu->uuid());
  }
  return absl::StrJoin(names, ",");
}

}  // namespace ringmaster
