// StreamApi on the CUDA runtime: what StepStreams calls on a real GPU.
#ifndef RINGMASTER_TRAINER_CUDA_CUDA_STREAM_API_H_
#define RINGMASTER_TRAINER_CUDA_CUDA_STREAM_API_H_

#include "trainer/step_streams.h"

namespace ringmaster {

// The process's one instance; it keeps no state (the runtime does).
StreamApi* CudaStreamApi();

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_CUDA_CUDA_STREAM_API_H_
