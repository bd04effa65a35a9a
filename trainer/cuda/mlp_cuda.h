// The MLP of trainer/mlp.h on a GPU: cuBLAS GEMMs and the kernels of
// kernels.h, parameters and gradients in one flat device buffer each (so
// gradient buckets are ranges, as on the CPU). With bf16 autocast the
// GEMMs read bfloat16 copies of weights and activations and accumulate in
// fp32; master weights, gradients and the optimizer stay fp32.
#ifndef RINGMASTER_TRAINER_CUDA_MLP_CUDA_H_
#define RINGMASTER_TRAINER_CUDA_MLP_CUDA_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/mlp.h"

namespace ringmaster {

// Not thread-safe; owns its device memory and cuBLAS handle; all work is
// enqueued on `stream`.
class MlpCuda {
 public:
  // Same widths and seed give the same initial weights as Mlp. `max_rows`
  // bounds the rows of a Forward.
  static absl::StatusOr<std::unique_ptr<MlpCuda>> Create(std::vector<int> widths, uint64_t seed,
                                                         int max_rows, bool bf16,
                                                         cudaStream_t stream);
  ~MlpCuda();

  const std::vector<ParamSpan>& param_spans() const { return spans_; }
  size_t size() const { return size_; }
  float* params() { return params_; }
  float* grads() { return grads_; }
  cudaStream_t stream() const { return stream_; }

  absl::Status CopyParamsToHost(std::vector<float>* out) const;
  absl::Status CopyGradsToHost(std::vector<float>* out) const;
  absl::Status CopyParamsFromHost(const std::vector<float>& in);

  // `x` is device memory [rows x input]; returns device logits.
  absl::StatusOr<const float*> Forward(const float* x, int rows);
  // As Mlp::Backward; `on_ready` runs on the host once the layer's work is
  // enqueued (the stream orders everything after it).
  absl::Status Backward(const float* dlogits, bool accumulate,
                        const std::function<void(int param)>& on_ready);

 private:
  MlpCuda(std::vector<int> widths, int max_rows, bool bf16, cudaStream_t stream)
      : widths_(std::move(widths)), max_rows_(max_rows), bf16_(bf16), stream_(stream) {}
  absl::Status Allocate(const std::vector<float>& initial);
  // Row-major C[M,N] = op(A) op(B) + beta C (fp32 or bf16 inputs).
  absl::Status Gemm(bool trans_a, bool trans_b, int m, int n, int k, const void* a, const void* b,
                    float beta, float* c);
  const void* AsGemmInput(const float* x, int64_t n, uint16_t* bf16_buffer);
  int layers() const { return static_cast<int>(widths_.size()) - 1; }

  std::vector<int> widths_;
  const int max_rows_;
  const bool bf16_;
  cudaStream_t stream_;
  cublasHandle_t cublas_ = nullptr;
  std::vector<ParamSpan> spans_;
  size_t size_ = 0;
  float* params_ = nullptr;
  float* grads_ = nullptr;
  uint16_t* params_bf16_ = nullptr;
  std::vector<float*> activations_;  // per layer, [max_rows x out]
  float* delta_ = nullptr;
  float* next_delta_ = nullptr;
  uint16_t* scratch_a_bf16_ = nullptr;
  uint16_t* scratch_b_bf16_ = nullptr;
  const float* input_ = nullptr;
  int rows_ = 0;
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_CUDA_MLP_CUDA_H_
