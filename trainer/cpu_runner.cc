#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
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
        classes_(widths.back()),
        trains_on_(Own()),
        written_to_(Own()) {}

  const std::vector<ParamSpan>& param_spans() const override { return model_.param_spans(); }
  size_t size() const override { return model_.params().size(); }
  float* params() override { return trains_on_.params; }
  float* grads() override { return model_.grads(); }
  bool UseGradientBuffer(float* buffer) override {
    model_.UseGradientBuffer(buffer);
    return true;
  }
  float* optimizer_state() override { return trains_on_.state; }
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
  // In place, unless the step trains on memory it may not write (a
  // snapshot): then into the runner's own.
  absl::Status UpdateRange(size_t offset, size_t n) override {
    return UpdateRangeInto(offset, n, Own().params, Own().state);
  }
  bool UpdatesInto() const override { return true; }
  absl::Status UpdateRangeInto(size_t offset, size_t n, float* params_out,
                               float* state_out) override {
    optimizer_->UpdateInto(offset, n, model_.grads(),
                           {trains_on_.params, trains_on_.state, params_out, state_out});
    written_to_ = {params_out, state_out};
    return absl::OkStatus();
  }
  absl::Status AfterStep() override {
    TrainOn(written_to_);
    return absl::OkStatus();
  }
  absl::StatusOr<double> GradNorm() override {
    return ringmaster::GradNorm(model_.grads(), size());
  }

  absl::Status CopyStateRange(size_t offset, size_t n, float* params_out,
                              float* state_out) override {
    const size_t size = model_.params().size();
    std::memcpy(params_out + offset, trains_on_.params + offset, n * sizeof(float));
    for (size_t plane = 0; (plane + 1) * size <= optimizer_state_size(); ++plane) {
      std::memcpy(state_out + plane * size + offset, trains_on_.state + plane * size + offset,
                  n * sizeof(float));
    }
    return absl::OkStatus();
  }

  absl::Status ReadState(std::vector<float>* params, std::vector<float>* state) override {
    params->assign(trains_on_.params, trains_on_.params + size());
    state->assign(trains_on_.state, trains_on_.state + optimizer_state_size());
    return absl::OkStatus();
  }
  absl::Status WriteState(const std::vector<float>& params,
                          const std::vector<float>* state) override {
    if (params.size() != size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the model has ", size(), " parameters, not ", params.size()));
    }
    std::vector<float>& own_state = *optimizer_->mutable_state();
    if (state != nullptr) {
      own_state = *state;
    } else if (trains_on_.state != own_state.data()) {  // kept, from where it is
      std::copy(trains_on_.state, trains_on_.state + own_state.size(), own_state.begin());
    }
    model_.params() = params;
    TrainOn(Own());
    written_to_ = Own();
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
  // Parameters and optimizer state, as one step leaves them.
  struct State {
    float* params;
    float* state;
  };
  State Own() { return {model_.params().data(), optimizer_->mutable_state()->data()}; }
  void TrainOn(State state) {
    trains_on_ = state;
    model_.ComputeWith(state.params == Own().params ? nullptr : state.params);
  }

  Mlp model_;
  std::unique_ptr<Optimizer> optimizer_;
  const int classes_;
  std::vector<float> dlogits_;
  // What the next step reads: its own memory, or where the last step
  // wrote (a snapshot's slot). The training thread's.
  State trains_on_;
  // Where the step's ranges were written; the reducer's thread while it
  // updates them, the training thread after.
  State written_to_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ModelRunner>> MakeCpuRunner(const v1::TrainerSpec& spec,
                                                           const std::vector<int>& widths) {
  return std::make_unique<CpuRunner>(spec, widths);
}

}  // namespace ringmaster
