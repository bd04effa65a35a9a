// The ModelRunner on a GPU: MlpCuda, the loss and optimizer kernels, and
// the ordering between the compute stream and the collective's stream (a
// bucket's all-reduce waits for the kernels that wrote its gradients; the
// next forward waits for the optimizer's kernels).
#ifndef RINGMASTER_TRAINER_CUDA_GPU_RUNNER_H_
#define RINGMASTER_TRAINER_CUDA_GPU_RUNNER_H_

#include <cuda_runtime.h>

#include "trainer/model_runner.h"

namespace ringmaster {

// `comm_stream` is the stream the collective runs on (NcclCollective's).
// The runner uses the current CUDA device.
absl::StatusOr<std::unique_ptr<ModelRunner>> MakeGpuRunner(const v1::TrainerSpec& spec,
                                                           const std::vector<int>& widths,
                                                           cudaStream_t comm_stream);

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_CUDA_GPU_RUNNER_H_
