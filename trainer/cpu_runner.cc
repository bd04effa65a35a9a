#include <algorithm>
#include <cstring>

#include "trainer/loss.h"
#include "trainer/model_runner.h"
#include "trainer/optimizer.h"

namespace ringmaster {
namespace {

constexpr int kEvalChunk = 1024;

class CpuRunner final : public ModelRunner {
 public:
  CpuRunner(const v1::TrainerSpec& spec, const std::vector<int>& widths)
      : model_(widths, static_cast<uint64_t>(spec.seed())),
        optimizer_(MakeOptimizer(spec.optimizer(), model_.params().size())),
        classes_(widths.back()) {}

  const std::vector<ParamSpan>& param_spans() const override { return model_.param_spans(); }
  size_t size() const override { return model_.params().size(); }
  float* params() override { return model_.params().data(); }
  float* grads() override { return model_.grads(); }
  bool UseGradientBuffer(float* buffer) override {
    model_.UseGradientBuffer(buffer);
    return true;
  }
  float* optimizer_state() override { return optimizer_->mutable_state()->data(); }
  size_t optimizer_state_size() const override { return optimizer_->mutable_state()->size(); }
  int64_t optimizer_steps() const override { return optimizer_->steps(); }
  void set_optimizer_steps(int64_t steps) override { optimizer_->set_steps(steps); }

  absl::StatusOr<double> ForwardBackward(const float* x, const int32_t* y, int rows,
                                         float loss_scale, bool accumulate,
                                         const std::function<void(int)>& on_ready) override {
    dlogits_.resize(static_cast<size_t>(rows) * classes_);
    const float* logits = model_.Forward(x, rows);
    LossResult loss = SoftmaxCrossEntropy(logits, y, rows, classes_, dlogits_.data(), loss_scale);
    model_.Backward(dlogits_.data(), accumulate, on_ready);
    return loss.loss;
  }

  void BeginStep(float lr, float grad_scale) override { optimizer_->BeginStep(lr, grad_scale); }
  absl::Status UpdateRange(size_t offset, size_t n) override {
    optimizer_->Update(offset, n, model_.params().data(), model_.grads());
    return absl::OkStatus();
  }
  absl::StatusOr<double> GradNorm() override {
    return ringmaster::GradNorm(model_.grads(), size());
  }

  absl::Status CopyStateRange(size_t offset, size_t n, float* params_out,
                              float* state_out) override {
    const size_t size = model_.params().size();
    std::memcpy(params_out + offset, model_.params().data() + offset, n * sizeof(float));
    const std::vector<float>& state = *optimizer_->mutable_state();
    for (size_t plane = 0; (plane + 1) * size <= state.size(); ++plane) {
      std::memcpy(state_out + plane * size + offset, state.data() + plane * size + offset,
                  n * sizeof(float));
    }
    return absl::OkStatus();
  }

  absl::Status ReadState(std::vector<float>* params, std::vector<float>* state) override {
    *params = model_.params();
    *state = *optimizer_->mutable_state();
    return absl::OkStatus();
  }
  absl::Status WriteState(const std::vector<float>& params,
                          const std::vector<float>* state) override {
    model_.params() = params;
    if (state != nullptr) *optimizer_->mutable_state() = *state;
    return absl::OkStatus();
  }

  absl::StatusOr<std::pair<double, double>> Evaluate(const Dataset& data) override {
    if (data.rows == 0) return std::make_pair(0.0, 0.0);
    double loss = 0;
    int64_t correct = 0;
    for (int64_t start = 0; start < data.rows; start += kEvalChunk) {
      const int rows = static_cast<int>(std::min<int64_t>(kEvalChunk, data.rows - start));
      const float* logits = model_.Forward(data.row(start), rows);
      LossResult r =
          SoftmaxCrossEntropy(logits, data.y.data() + start, rows, data.classes, nullptr);
      loss += r.loss * rows;
      correct += r.correct;
    }
    return std::make_pair(static_cast<double>(correct) / data.rows, loss / data.rows);
  }

 private:
  Mlp model_;
  std::unique_ptr<Optimizer> optimizer_;
  const int classes_;
  std::vector<float> dlogits_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ModelRunner>> MakeCpuRunner(const v1::TrainerSpec& spec,
                                                           const std::vector<int>& widths) {
  return std::make_unique<CpuRunner>(spec, widths);
}

}  // namespace ringmaster
