#include "trainer/cuda/cuda_stream_api.h"

#include <cuda_runtime.h>

#include "common/cuda/cuda_check.h"
#include "common/cuda/device.h"

namespace ringmaster {
namespace {

cudaStream_t AsStream(StreamApi::Stream stream) { return static_cast<cudaStream_t>(stream); }
cudaEvent_t AsEvent(StreamApi::Event event) { return static_cast<cudaEvent_t>(event); }

class Runtime final : public StreamApi {
 public:
  absl::Status SetDevice(int device) override { return UseDevice(device); }

  absl::StatusOr<int> GetDevice() override {
    int device = -1;
    CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
    return device;
  }

  absl::StatusOr<Event> CreateEvent() override {
    cudaEvent_t event = nullptr;
    CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return static_cast<Event>(event);
  }

  void DestroyEvent(Event event) override { cudaEventDestroy(AsEvent(event)); }

  absl::Status Record(Event event, Stream stream) override {
    CUDA_RETURN_IF_ERROR(cudaEventRecord(AsEvent(event), AsStream(stream)));
    return absl::OkStatus();
  }

  absl::Status Wait(Stream stream, Event event) override {
    CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(AsStream(stream), AsEvent(event), 0));
    return absl::OkStatus();
  }
};

}  // namespace

StreamApi* CudaStreamApi() {
  static Runtime* const runtime = new Runtime;
  return runtime;
}

}  // namespace ringmaster
