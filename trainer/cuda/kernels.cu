#include "trainer/cuda/kernels.h"

#include <cuda_bf16.h>

namespace ringmaster::cuda {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 ? blocks : 65535);
}

// Grid-stride loops: any n with a bounded grid.
#define GRID_LOOP(i, n)                                                     \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); \
       i += int64_t{blockDim.x} * gridDim.x)

__global__ void BiasActivationKernel(float* out, const float* bias, int rows, int cols, bool relu) {
  GRID_LOOP(i, int64_t{rows} * cols) {
    const float v = out[i] + bias[i % cols];
    out[i] = relu ? fmaxf(v, 0.0f) : v;
  }
}

__global__ void ReluBackwardKernel(float* delta, const float* act, int64_t n) {
  GRID_LOOP(i, n) { delta[i] = act[i] > 0.0f ? delta[i] : 0.0f; }
}

__global__ void BiasGradKernel(float* db, const float* delta, int rows, int cols, bool accumulate) {
  GRID_LOOP(j, cols) {
    float sum = accumulate ? db[j] : 0.0f;
    for (int r = 0; r < rows; ++r) sum += delta[int64_t{r} * cols + j];
    db[j] = sum;
  }
}

__global__ void SoftmaxCrossEntropyKernel(const float* logits, const int32_t* labels, int rows,
                                          int classes, float* dlogits, float scale, float* loss,
                                          float* correct) {
  GRID_LOOP(r, rows) {
    const float* z = logits + r * classes;
    float max = z[0];
    int arg_max = 0;
    for (int c = 1; c < classes; ++c) {
      if (z[c] > max) {
        max = z[c];
        arg_max = c;
      }
    }
    float sum = 0.0f;
    for (int c = 0; c < classes; ++c) sum += expf(z[c] - max);
    const float log_sum = logf(sum) + max;
    const int label = labels[r];
    loss[r] = log_sum - z[label];
    correct[r] = arg_max == label ? 1.0f : 0.0f;
    if (dlogits != nullptr) {
      for (int c = 0; c < classes; ++c) {
        dlogits[r * classes + c] = (expf(z[c] - log_sum) - (c == label ? 1.0f : 0.0f)) * scale;
      }
    }
  }
}

__global__ void SgdKernel(float* p, const float* g, float* v, int64_t n, float lr, float scale,
                          float wd, float momentum, bool first) {
  GRID_LOOP(i, n) {
    float d = scale * g[i] + wd * p[i];
    if (v != nullptr) {
      d = first ? d : momentum * v[i] + d;
      v[i] = d;
    }
    p[i] -= lr * d;
  }
}

__global__ void AdamWKernel(float* p, const float* g, float* m, float* v, int64_t n,
                            float step_size, float inv_sqrt_c2, float decay, float b1, float b2,
                            float eps, float scale) {
  GRID_LOOP(i, n) {
    const float grad = scale * g[i];
    const float mi = b1 * m[i] + (1 - b1) * grad;
    const float vi = b2 * v[i] + (1 - b2) * grad * grad;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step_size * mi / (sqrtf(vi) * inv_sqrt_c2 + eps);
  }
}

__global__ void ToBf16Kernel(const float* in, __nv_bfloat16* out, int64_t n, float scale) {
  GRID_LOOP(i, n) { out[i] = __float2bfloat16_rn(in[i] * scale); }
}

__global__ void FromBf16Kernel(const __nv_bfloat16* in, float* out, int64_t n) {
  GRID_LOOP(i, n) { out[i] = __bfloat162float(in[i]); }
}

}  // namespace

cudaError_t BiasActivation(float* out, const float* bias, int rows, int cols, bool relu,
                           cudaStream_t stream) {
  BiasActivationKernel<<<Blocks(int64_t{rows} * cols), kThreads, 0, stream>>>(out, bias, rows, cols,
                                                                              relu);
  return cudaGetLastError();
}

cudaError_t ReluBackward(float* delta, const float* act, int64_t n, cudaStream_t stream) {
  ReluBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(delta, act, n);
  return cudaGetLastError();
}

cudaError_t BiasGrad(float* db, const float* delta, int rows, int cols, bool accumulate,
                     cudaStream_t stream) {
  BiasGradKernel<<<Blocks(cols), kThreads, 0, stream>>>(db, delta, rows, cols, accumulate);
  return cudaGetLastError();
}

cudaError_t SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int rows, int classes,
                                float* dlogits, float grad_scale, float* loss, float* correct,
                                cudaStream_t stream) {
  SoftmaxCrossEntropyKernel<<<Blocks(rows), kThreads, 0, stream>>>(
      logits, labels, rows, classes, dlogits, grad_scale / rows, loss, correct);
  return cudaGetLastError();
}

cudaError_t SgdUpdate(float* params, const float* grads, float* velocity, int64_t n, float lr,
                      float grad_scale, float weight_decay, float momentum, bool first,
                      cudaStream_t stream) {
  SgdKernel<<<Blocks(n), kThreads, 0, stream>>>(params, grads, momentum > 0 ? velocity : nullptr, n,
                                                lr, grad_scale, weight_decay, momentum, first);
  return cudaGetLastError();
}

cudaError_t AdamWUpdate(float* params, const float* grads, float* m, float* v, int64_t n,
                        float step_size, float inv_sqrt_c2, float decay, float beta1, float beta2,
                        float eps, float grad_scale, cudaStream_t stream) {
  AdamWKernel<<<Blocks(n), kThreads, 0, stream>>>(params, grads, m, v, n, step_size, inv_sqrt_c2,
                                                  decay, beta1, beta2, eps, grad_scale);
  return cudaGetLastError();
}

cudaError_t FloatToBf16(const float* in, uint16_t* out, int64_t n, cudaStream_t stream,
                        float scale) {
  ToBf16Kernel<<<Blocks(n), kThreads, 0, stream>>>(in, reinterpret_cast<__nv_bfloat16*>(out), n,
                                                   scale);
  return cudaGetLastError();
}

cudaError_t Bf16ToFloat(const uint16_t* in, float* out, int64_t n, cudaStream_t stream) {
  FromBf16Kernel<<<Blocks(n), kThreads, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(in),
                                                     out, n);
  return cudaGetLastError();
}

}  // namespace ringmaster::cuda
