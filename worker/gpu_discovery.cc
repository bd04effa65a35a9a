#include "worker/gpu_discovery.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace ringmaster {
namespace {

// The few CUDA runtime entry points used, by their C signatures.
using GetDeviceCountFn = int (*)(int*);
using SetDeviceFn = int (*)(int);
using MemGetInfoFn = int (*)(size_t*, size_t*);
using GetErrorStringFn = const char* (*)(int);

}  // namespace

std::vector<v1::Gpu> DiscoverGpus(std::string* why_none) {
  void* cudart = nullptr;
  for (const char* name : {"libcudart.so.13", "libcudart.so.12", "libcudart.so",
                           "/usr/local/cuda/lib64/libcudart.so"}) {
    cudart = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (cudart != nullptr) break;
  }
  if (cudart == nullptr) {
    *why_none = "the CUDA runtime (libcudart) is not installed";
    return {};
  }
  auto count_fn = reinterpret_cast<GetDeviceCountFn>(dlsym(cudart, "cudaGetDeviceCount"));
  auto set_fn = reinterpret_cast<SetDeviceFn>(dlsym(cudart, "cudaSetDevice"));
  auto mem_fn = reinterpret_cast<MemGetInfoFn>(dlsym(cudart, "cudaMemGetInfo"));
  auto error_fn = reinterpret_cast<GetErrorStringFn>(dlsym(cudart, "cudaGetErrorString"));
  if (count_fn == nullptr || set_fn == nullptr || mem_fn == nullptr) {
    *why_none = "libcudart lacks cudaGetDeviceCount";
    return {};
  }
  int count = 0;
  if (int rc = count_fn(&count); rc != 0) {
    *why_none = absl::StrCat("cudaGetDeviceCount: ", error_fn ? error_fn(rc) : "error ",
                             error_fn ? "" : absl::StrCat(rc));
    return {};
  }
  if (count == 0) *why_none = "the CUDA runtime sees no device";
  std::vector<v1::Gpu> gpus;
  for (int i = 0; i < count; ++i) {
    v1::Gpu gpu;
    gpu.set_index(i);
    size_t free_bytes = 0, total_bytes = 0;
    if (set_fn(i) == 0 && mem_fn(&free_bytes, &total_bytes) == 0) {
      gpu.set_memory_total_bytes(static_cast<int64_t>(total_bytes));
    }
    gpus.push_back(std::move(gpu));
  }
  return gpus;
}

}  // namespace ringmaster
