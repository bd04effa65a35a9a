#include "trainer/cuda/mlp_cuda.h"

#include <algorithm>

#include "common/status_macros.h"
#include "trainer/cuda/kernels.h"
#include "trainer/cuda/nccl_check.h"

namespace ringmaster {

absl::StatusOr<std::unique_ptr<MlpCuda>> MlpCuda::Create(std::vector<int> widths, uint64_t seed,
                                                         int max_rows, bool bf16,
                                                         cudaStream_t stream) {
  // The CPU model defines the initial weights, so both start identical.
  Mlp reference(widths, seed);
  std::unique_ptr<MlpCuda> model(new MlpCuda(std::move(widths), max_rows, bf16, stream));
  model->spans_ = reference.param_spans();
  RETURN_IF_ERROR(model->Allocate(reference.params()));
  return model;
}

absl::Status MlpCuda::Allocate(const std::vector<float>& initial) {
  size_ = initial.size();
  CUBLAS_RETURN_IF_ERROR(cublasCreate(&cublas_));
  CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas_, stream_));
  CUDA_RETURN_IF_ERROR(cudaMalloc(&params_, size_ * sizeof(float)));
  CUDA_RETURN_IF_ERROR(cudaMalloc(&grads_, size_ * sizeof(float)));
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(grads_, 0, size_ * sizeof(float), stream_));
  int widest = 0;
  for (int w : widths_) widest = std::max(widest, w);
  for (int l = 0; l < layers(); ++l) {
    float* a = nullptr;
    CUDA_RETURN_IF_ERROR(
        cudaMalloc(&a, static_cast<size_t>(max_rows_) * widths_[l + 1] * sizeof(float)));
    activations_.push_back(a);
  }
  const size_t rows_bytes = static_cast<size_t>(max_rows_) * widest * sizeof(float);
  CUDA_RETURN_IF_ERROR(cudaMalloc(&delta_, rows_bytes));
  CUDA_RETURN_IF_ERROR(cudaMalloc(&next_delta_, rows_bytes));
  if (bf16_) {
    CUDA_RETURN_IF_ERROR(cudaMalloc(&params_bf16_, size_ * sizeof(uint16_t)));
    CUDA_RETURN_IF_ERROR(cudaMalloc(&scratch_a_bf16_, rows_bytes / 2));
    CUDA_RETURN_IF_ERROR(cudaMalloc(&scratch_b_bf16_, rows_bytes / 2));
  }
  return CopyParamsFromHost(initial);
}

MlpCuda::~MlpCuda() {
  // Every resource is released even when an earlier release fails.
  for (float* a : activations_) cudaFree(a);
  for (void* p :
       {static_cast<void*>(params_), static_cast<void*>(grads_), static_cast<void*>(params_bf16_),
        static_cast<void*>(delta_), static_cast<void*>(next_delta_),
        static_cast<void*>(scratch_a_bf16_), static_cast<void*>(scratch_b_bf16_)}) {
    if (p != nullptr) cudaFree(p);
  }
  if (cublas_ != nullptr) cublasDestroy(cublas_);
}

absl::Status MlpCuda::CopyParamsToHost(std::vector<float>* out) const {
  out->resize(size_);
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out->data(), params_, size_ * sizeof(float),
                                       cudaMemcpyDeviceToHost, stream_));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status MlpCuda::CopyGradsToHost(std::vector<float>* out) const {
  out->resize(size_);
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(out->data(), grads_, size_ * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status MlpCuda::CopyParamsFromHost(const std::vector<float>& in) {
  if (in.size() != size_) return absl::InvalidArgumentError("parameter count mismatch");
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(params_, in.data(), size_ * sizeof(float), cudaMemcpyHostToDevice, stream_));
  return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", __FILE__, __LINE__);
}

const void* MlpCuda::AsGemmInput(const float* x, int64_t n, uint16_t* bf16_buffer) {
  if (!bf16_) return x;
  cuda::FloatToBf16(x, bf16_buffer, n, stream_);
  return bf16_buffer;
}

absl::Status MlpCuda::Gemm(bool trans_a, bool trans_b, int m, int n, int k, const void* a,
                           const void* b, float beta, float* c) {
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
  const float alpha = 1.0f;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = trans_b ? k : n;
  const int lda = trans_a ? m : k;
  if (!bf16_) {
    CUBLAS_RETURN_IF_ERROR(cublasSgemm(cublas_, op_b, op_a, n, m, k, &alpha,
                                       static_cast<const float*>(b), ldb,
                                       static_cast<const float*>(a), lda, &beta, c, n));
    return absl::OkStatus();
  }
  CUBLAS_RETURN_IF_ERROR(cublasGemmEx(cublas_, op_b, op_a, n, m, k, &alpha, b, CUDA_R_16BF, ldb, a,
                                      CUDA_R_16BF, lda, &beta, c, CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT));
  return absl::OkStatus();
}

absl::StatusOr<const float*> MlpCuda::Forward(const float* x, int rows) {
  if (rows > max_rows_) return absl::InvalidArgumentError("more rows than max_rows");
  rows_ = rows;
  input_ = x;
  if (bf16_) CUDA_RETURN_IF_ERROR(cuda::FloatToBf16(params_, params_bf16_, size_, stream_));
  const float* in = x;
  for (int l = 0; l < layers(); ++l) {
    const int n_in = widths_[l], n_out = widths_[l + 1];
    const void* w = bf16_ ? static_cast<const void*>(params_bf16_ + spans_[2 * l].offset)
                          : params_ + spans_[2 * l].offset;
    const void* a = AsGemmInput(in, int64_t{rows} * n_in, scratch_a_bf16_);
    RETURN_IF_ERROR(Gemm(false, false, rows, n_out, n_in, a, w, 0.0f, activations_[l]));
    CUDA_RETURN_IF_ERROR(cuda::BiasActivation(activations_[l], params_ + spans_[2 * l + 1].offset,
                                              rows, n_out, l + 1 < layers(), stream_));
    in = activations_[l];
  }
  return activations_.back();
}

absl::Status MlpCuda::Backward(const float* dlogits, bool accumulate,
                               const std::function<void(int param)>& on_ready) {
  const int rows = rows_;
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(delta_, dlogits,
                                       static_cast<size_t>(rows) * widths_.back() * sizeof(float),
                                       cudaMemcpyDeviceToDevice, stream_));
  for (int l = layers() - 1; l >= 0; --l) {
    const int n_in = widths_[l], n_out = widths_[l + 1];
    const float* in = l == 0 ? input_ : activations_[l - 1];
    const void* in_g = AsGemmInput(in, int64_t{rows} * n_in, scratch_a_bf16_);
    const void* delta_g = AsGemmInput(delta_, int64_t{rows} * n_out, scratch_b_bf16_);
    // dW = in^T delta; db = column sums of delta.
    RETURN_IF_ERROR(Gemm(true, false, n_in, n_out, rows, in_g, delta_g, accumulate ? 1.0f : 0.0f,
                         grads_ + spans_[2 * l].offset));
    CUDA_RETURN_IF_ERROR(cuda::BiasGrad(grads_ + spans_[2 * l + 1].offset, delta_, rows, n_out,
                                        accumulate, stream_));
    if (l > 0) {
      const void* w = bf16_ ? static_cast<const void*>(params_bf16_ + spans_[2 * l].offset)
                            : params_ + spans_[2 * l].offset;
      RETURN_IF_ERROR(Gemm(false, true, rows, n_in, n_out, delta_g, w, 0.0f, next_delta_));
    }
    if (on_ready) {
      on_ready(2 * l + 1);
      on_ready(2 * l);
    }
    if (l == 0) break;
    CUDA_RETURN_IF_ERROR(
        cuda::ReluBackward(next_delta_, activations_[l - 1], int64_t{rows} * n_in, stream_));
    std::swap(delta_, next_delta_);
  }
  return absl::OkStatus();
}

}  // namespace ringmaster
