#include "trainer/cuda/gpu_runner.h"

#include <algorithm>
#include <cmath>

#include "common/cuda/cuda_check.h"
#include "common/status_macros.h"
#include "trainer/cuda/cuda_stream_api.h"
#include "trainer/cuda/kernels.h"
#include "trainer/cuda/mlp_cuda.h"
#include "trainer/cuda/nccl_check.h"

namespace ringmaster {
namespace {

constexpr int kEvalChunk = 1024;

class GpuRunner final : public ModelRunner {
 public:
  GpuRunner(const v1::TrainerSpec& spec, cudaStream_t comm_stream)
      : opt_(spec.optimizer()), comm_stream_(comm_stream) {}

  absl::Status Init(const v1::TrainerSpec& spec, const std::vector<int>& widths) {
    // The device current when the runner is made is its device, for every
    // thread that uses it (EnterThread).
    int device = 0;
    CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
    input_ = widths.front();
    classes_ = widths.back();
    max_rows_ = std::max(std::max(1, spec.batch_size()), kEvalChunk);
    CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ASSIGN_OR_RETURN(model_, MlpCuda::Create(widths, static_cast<uint64_t>(spec.seed()), max_rows_,
                                             spec.precision() == "bf16", stream_));
    ASSIGN_OR_RETURN(streams_, StepStreams::Create(CudaStreamApi(), device, stream_, comm_stream_,
                                                   static_cast<int>(model_->param_spans().size())));
    const size_t n = model_->size();
    state_size_ = opt_.type() == "sgd" ? (opt_.momentum() > 0 ? n : 0) : 2 * n;
    CUDA_RETURN_IF_ERROR(cudaMalloc(&state_, std::max<size_t>(1, state_size_) * sizeof(float)));
    CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(state_, 0, std::max<size_t>(1, state_size_) * sizeof(float), stream_));
    CUDA_RETURN_IF_ERROR(
        cudaMalloc(&x_, static_cast<size_t>(max_rows_) * widths[0] * sizeof(float)));
    CUDA_RETURN_IF_ERROR(cudaMalloc(&y_, max_rows_ * sizeof(int32_t)));
    CUDA_RETURN_IF_ERROR(
        cudaMalloc(&dlogits_, static_cast<size_t>(max_rows_) * classes_ * sizeof(float)));
    CUDA_RETURN_IF_ERROR(cudaMalloc(&loss_, max_rows_ * sizeof(float)));
    CUDA_RETURN_IF_ERROR(cudaMalloc(&correct_, max_rows_ * sizeof(float)));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

  ~GpuRunner() override {
    streams_.reset();
    for (void* p : {static_cast<void*>(state_), static_cast<void*>(x_), static_cast<void*>(y_),
                    static_cast<void*>(dlogits_), static_cast<void*>(loss_),
                    static_cast<void*>(correct_), static_cast<void*>(bf16_)}) {
      if (p != nullptr) cudaFree(p);
    }
    model_.reset();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  const std::vector<ParamSpan>& param_spans() const override { return model_->param_spans(); }
  size_t size() const override { return model_->size(); }
  float* params() override { return model_->params(); }
  float* grads() override { return model_->grads(); }
  float* optimizer_state() override { return state_; }
  size_t optimizer_state_size() const override { return state_size_; }
  int64_t optimizer_steps() const override { return steps_; }
  void set_optimizer_steps(int64_t steps) override { steps_ = steps; }

  absl::StatusOr<double> ForwardBackward(const float* x, const int32_t* y, int rows,
                                         float loss_scale, bool accumulate,
                                         const std::function<void(int)>& on_ready) override {
    RETURN_IF_ERROR(streams_->CheckDevice());
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(x_, x, static_cast<size_t>(rows) * input_ * sizeof(float),
                                         cudaMemcpyHostToDevice, stream_));
    CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(y_, y, rows * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
    ASSIGN_OR_RETURN(const float* logits, model_->Forward(x_, rows));
    CUDA_RETURN_IF_ERROR(cuda::SoftmaxCrossEntropy(logits, y_, rows, classes_, dlogits_, loss_scale,
                                                   loss_, correct_, stream_));
    // The parameter's event marks the end of the kernels that wrote its
    // gradient; BeforeReduce makes the collective's stream wait for it.
    absl::Status recorded;
    auto record_then_mark = [&](int param) {
      if (recorded.ok()) recorded = streams_->GradientReady(param);
      if (on_ready) on_ready(param);
    };
    RETURN_IF_ERROR(model_->Backward(
        dlogits_, accumulate, on_ready ? std::function<void(int)>(record_then_mark) : nullptr));
    RETURN_IF_ERROR(recorded);
    std::vector<float> losses(rows);
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(losses.data(), loss_, rows * sizeof(float),
                                         cudaMemcpyDeviceToHost, stream_));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    double sum = 0;
    for (float l : losses) sum += l;
    return sum / rows;
  }

  absl::Status EnterThread() override { return streams_->EnterThread(); }

  absl::Status BeforeReduce(const Bucket& bucket) override {
    return streams_->BeforeReduce(bucket);
  }

  void BeginStep(float lr, float grad_scale) override {
    lr_ = lr;
    grad_scale_ = grad_scale;
    first_ = steps_ == 0;
    ++steps_;
  }

  absl::Status UpdateRange(size_t offset, size_t n) override {
    // On the collective's stream, after the bucket's all-reduce.
    RETURN_IF_ERROR(streams_->CheckDevice());
    float* p = model_->params() + offset;
    const float* g = model_->grads() + offset;
    if (opt_.type() == "sgd") {
      CUDA_RETURN_IF_ERROR(cuda::SgdUpdate(
          p, g, state_ + offset, n, lr_, grad_scale_, static_cast<float>(opt_.weight_decay()),
          static_cast<float>(opt_.momentum()), first_, comm_stream_));
      return absl::OkStatus();
    }
    const double b1 = opt_.beta1() > 0 ? opt_.beta1() : 0.9;
    const double b2 = opt_.beta2() > 0 ? opt_.beta2() : 0.999;
    const double c1 = 1 - std::pow(b1, static_cast<double>(steps_));
    const double c2 = 1 - std::pow(b2, static_cast<double>(steps_));
    CUDA_RETURN_IF_ERROR(cuda::AdamWUpdate(
        p, g, state_ + offset, state_ + model_->size() + offset, n, static_cast<float>(lr_ / c1),
        static_cast<float>(1 / std::sqrt(c2)), static_cast<float>(1 - lr_ * opt_.weight_decay()),
        static_cast<float>(b1), static_cast<float>(b2),
        static_cast<float>(opt_.eps() > 0 ? opt_.eps() : 1e-8), grad_scale_, comm_stream_));
    return absl::OkStatus();
  }

  std::function<absl::Status(float*, size_t, float)> Bf16Reduce(Collective* comm) override {
    return [this, comm](float* data, size_t n, float scale) -> absl::Status {
      RETURN_IF_ERROR(streams_->CheckDevice());
      if (bf16_ == nullptr) {
        CUDA_RETURN_IF_ERROR(cudaMalloc(&bf16_, model_->size() * sizeof(uint16_t)));
      }
      // All on the collective's stream, after the bucket's gradients.
      CUDA_RETURN_IF_ERROR(cuda::FloatToBf16(data, bf16_, n, comm_stream_, scale));
      RETURN_IF_ERROR(comm->AllReduceSumBf16(bf16_, n));
      CUDA_RETURN_IF_ERROR(cuda::Bf16ToFloat(bf16_, data, n, comm_stream_));
      return absl::OkStatus();
    };
  }

  absl::Status AfterStep() override { return streams_->AfterStep(); }

  absl::StatusOr<double> GradNorm() override {
    // Gradients are reduced on the collective's stream.
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(comm_stream_));
    std::vector<float> host;
    RETURN_IF_ERROR(model_->CopyGradsToHost(&host));
    double sum = 0;
    for (float g : host) sum += static_cast<double>(g) * g;
    return std::sqrt(sum);
  }

  absl::Status CopyStateRange(size_t offset, size_t n, float* params_out,
                              float* state_out) override {
    // On the collective's stream: after the range's update.
    const size_t size = model_->size();
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(params_out + offset, model_->params() + offset,
                                         n * sizeof(float), cudaMemcpyDeviceToHost, comm_stream_));
    for (size_t plane = 0; (plane + 1) * size <= state_size_; ++plane) {
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(state_out + plane * size + offset,
                                           state_ + plane * size + offset, n * sizeof(float),
                                           cudaMemcpyDeviceToHost, comm_stream_));
    }
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(comm_stream_));
    return absl::OkStatus();
  }

  absl::Status ReadState(std::vector<float>* params, std::vector<float>* state) override {
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(comm_stream_));
    RETURN_IF_ERROR(model_->CopyParamsToHost(params));
    state->resize(state_size_);
    if (state_size_ > 0) {
      CUDA_RETURN_IF_ERROR(
          cudaMemcpy(state->data(), state_, state_size_ * sizeof(float), cudaMemcpyDeviceToHost));
    }
    return absl::OkStatus();
  }

  absl::Status WriteState(const std::vector<float>& params,
                          const std::vector<float>* state) override {
    RETURN_IF_ERROR(model_->CopyParamsFromHost(params));
    if (state != nullptr) {
      if (state->size() != state_size_) {
        return absl::InvalidArgumentError("optimizer state size mismatch");
      }
      if (state_size_ > 0) {
        CUDA_RETURN_IF_ERROR(
            cudaMemcpy(state_, state->data(), state_size_ * sizeof(float), cudaMemcpyHostToDevice));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::pair<double, double>> Evaluate(const Dataset& data) override {
    if (data.rows == 0) return std::make_pair(0.0, 0.0);
    RETURN_IF_ERROR(streams_->CheckDevice());
    double loss = 0, correct = 0;
    std::vector<float> l(kEvalChunk), c(kEvalChunk);
    for (int64_t start = 0; start < data.rows; start += kEvalChunk) {
      const int rows = static_cast<int>(std::min<int64_t>(kEvalChunk, data.rows - start));
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
          x_, data.row(start), static_cast<size_t>(rows) * data.features * sizeof(float),
          cudaMemcpyHostToDevice, stream_));
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(y_, data.y.data() + start, rows * sizeof(int32_t),
                                           cudaMemcpyHostToDevice, stream_));
      ASSIGN_OR_RETURN(const float* logits, model_->Forward(x_, rows));
      CUDA_RETURN_IF_ERROR(cuda::SoftmaxCrossEntropy(logits, y_, rows, classes_, nullptr, 1.0f,
                                                     loss_, correct_, stream_));
      CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(l.data(), loss_, rows * sizeof(float), cudaMemcpyDeviceToHost, stream_));
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(c.data(), correct_, rows * sizeof(float),
                                           cudaMemcpyDeviceToHost, stream_));
      CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
      for (int i = 0; i < rows; ++i) {
        loss += l[i];
        correct += c[i];
      }
    }
    return std::make_pair(correct / data.rows, loss / data.rows);
  }

 private:
  const v1::TrainerSpec::Optimizer opt_;
  cudaStream_t comm_stream_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<MlpCuda> model_;
  std::unique_ptr<StepStreams> streams_;  // device, events, the order of the two streams
  float* state_ = nullptr;
  size_t state_size_ = 0;
  float* x_ = nullptr;
  int32_t* y_ = nullptr;
  float* dlogits_ = nullptr;
  float* loss_ = nullptr;
  float* correct_ = nullptr;
  uint16_t* bf16_ = nullptr;  // compression scratch, one bucket at a time
  int input_ = 0;
  int classes_ = 0;
  int max_rows_ = 0;
  int64_t steps_ = 0;
  float lr_ = 0, grad_scale_ = 1;
  bool first_ = true;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ModelRunner>> MakeGpuRunner(const v1::TrainerSpec& spec,
                                                           const std::vector<int>& widths,
                                                           cudaStream_t comm_stream) {
  auto runner = std::make_unique<GpuRunner>(spec, comm_stream);
  RETURN_IF_ERROR(runner->Init(spec, widths));
  return std::unique_ptr<ModelRunner>(std::move(runner));
}

}  // namespace ringmaster
