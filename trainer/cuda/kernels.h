// Element-wise CUDA kernels of the GPU trainer. Each launcher enqueues on
// `stream` and returns the launch error (cudaSuccess when enqueued).
#ifndef RINGMASTER_TRAINER_CUDA_KERNELS_H_
#define RINGMASTER_TRAINER_CUDA_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace ringmaster::cuda {

// out[r, j] = out[r, j] + bias[j], then max(., 0) when `relu`.
cudaError_t BiasActivation(float* out, const float* bias, int rows, int cols, bool relu,
                           cudaStream_t stream);
// delta[i] = act[i] > 0 ? delta[i] : 0 (ReLU's derivative at its output).
cudaError_t ReluBackward(float* delta, const float* act, int64_t n, cudaStream_t stream);
// db[j] = (accumulate ? db[j] : 0) + sum over rows of delta[r, j].
cudaError_t BiasGrad(float* db, const float* delta, int rows, int cols, bool accumulate,
                     cudaStream_t stream);
// Softmax cross-entropy per row: loss[r] and correct[r] (0 or 1); when
// dlogits is not null, d(mean loss)/d(logits) x grad_scale.
cudaError_t SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int rows, int classes,
                                float* dlogits, float grad_scale, float* loss, float* correct,
                                cudaStream_t stream);
// PyTorch's SGD with momentum (first: the buffer takes the gradient).
cudaError_t SgdUpdate(float* params, const float* grads, float* velocity, int64_t n, float lr,
                      float grad_scale, float weight_decay, float momentum, bool first,
                      cudaStream_t stream);
// AdamW with decoupled weight decay; bias corrections computed by the caller.
cudaError_t AdamWUpdate(float* params, const float* grads, float* m, float* v, int64_t n,
                        float step_size, float inv_sqrt_c2, float decay, float beta1, float beta2,
                        float eps, float grad_scale, cudaStream_t stream);
// bfloat16 conversions, round to nearest even; the first scales as well.
cudaError_t FloatToBf16(const float* in, uint16_t* out, int64_t n, cudaStream_t stream,
                        float scale = 1.0f);
cudaError_t Bf16ToFloat(const uint16_t* in, float* out, int64_t n, cudaStream_t stream);

}  // namespace ringmaster::cuda

#endif  // RINGMASTER_TRAINER_CUDA_KERNELS_H_
