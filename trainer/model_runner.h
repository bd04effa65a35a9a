// The per-rank compute the training loop drives: a model, its loss and its
// optimizer, on the CPU (CpuRunner) or a GPU (cuda/gpu_runner). The loop
// itself (sharding, buckets, overlap, resume, checkpoints, progress) is
// shared and is tested on the CPU.
#ifndef RINGMASTER_TRAINER_MODEL_RUNNER_H_
#define RINGMASTER_TRAINER_MODEL_RUNNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "trainer/collective.h"
#include "trainer/dataset.h"
#include "trainer/mlp.h"
#include "trainer/reducer.h"

namespace ringmaster {

// Threading: the training thread calls everything except BeforeReduce and
// UpdateRange, which the reducer's thread calls per bucket while the
// training thread runs the rest of the backward pass.
class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual const std::vector<ParamSpan>& param_spans() const = 0;
  virtual size_t size() const = 0;
  // What the collectives work on: host memory on the CPU, device memory on
  // a GPU.
  virtual float* params() = 0;
  virtual float* grads() = 0;
  // Moves the gradients into `buffer` (from Collective::SharedBuffer);
  // false when this runner cannot (its gradients live on a device).
  virtual bool UseGradientBuffer(float* buffer) { return false; }
  virtual float* optimizer_state() = 0;
  virtual size_t optimizer_state_size() const = 0;
  virtual int64_t optimizer_steps() const = 0;
  virtual void set_optimizer_steps(int64_t steps) = 0;

  // One micro-batch of host rows: forward, loss, backward; gradients are
  // those of loss x loss_scale, added to the previous ones when
  // `accumulate`. `on_ready(p)` as in Mlp::Backward. Returns the mean loss.
  virtual absl::StatusOr<double> ForwardBackward(
      const float* x, const int32_t* y, int rows, float loss_scale, bool accumulate,
      const std::function<void(int param)>& on_ready) = 0;

  // First on any thread other than the one that made the runner, before
  // it calls the runner (a GPU runner makes its device the thread's).
  virtual absl::Status EnterThread() { return absl::OkStatus(); }
  // Reducer's thread, before bucket's all-reduce: order it after the work
  // that wrote its gradients.
  virtual absl::Status BeforeReduce(const Bucket& bucket) { return absl::OkStatus(); }
  // Starts an optimizer step at `lr` with gradients scaled by `grad_scale`.
  virtual void BeginStep(float lr, float grad_scale) = 0;
  // Applies the step to [offset, offset + n); reducer's or training thread.
  virtual absl::Status UpdateRange(size_t offset, size_t n) = 0;
  // Whether UpdateRangeInto may be called (the CPU runner).
  virtual bool UpdatesInto() const { return false; }
  // As UpdateRange, but the range's new parameters go to params_out +
  // offset and each plane of its optimizer state to state_out + plane *
  // size() + offset (CopyStateRange's layout), and the current ones stay
  // as they were. From AfterStep on the runner trains on params_out and
  // state_out, so the caller keeps them valid; the runner's next step
  // writes elsewhere (its own memory, or where UpdateRangeInto says), so
  // they then stay as this step left them. Every range of a step goes the
  // same way.
  virtual absl::Status UpdateRangeInto(size_t offset, size_t n, float* params_out,
                                       float* state_out) {
    return absl::UnimplementedError("this runner updates its parameters only in place");
  }
  // Training thread, after every range of the step: the next forward must
  // see the updated parameters, wherever the step wrote them.
  virtual absl::Status AfterStep() { return absl::OkStatus(); }
  virtual absl::StatusOr<double> GradNorm() = 0;
  // For bf16 gradient compression where the gradients are not host memory:
  // see ReducerOptions::reduce_bf16. Empty: the reducer's host path.
  virtual std::function<absl::Status(float* data, size_t n, float scale)> Bf16Reduce(
      Collective* comm) {
    return nullptr;
  }

  // Host copies of [offset, offset + n) of the parameters, to
  // params_out + offset, and of each plane of the optimizer state (its
  // optimizer_state_size() floats are planes of size() each: none, a
  // momentum, or AdamW's two moments), to state_out + plane * size() +
  // offset: a snapshot, bucket by bucket. The training thread after a
  // step, or the reducer's after the range's update.
  virtual absl::Status CopyStateRange(size_t offset, size_t n, float* params_out,
                                      float* state_out) = 0;
  // Host copies, for checkpoints and resume.
  virtual absl::Status ReadState(std::vector<float>* params,
                                 std::vector<float>* optimizer_state) = 0;
  virtual absl::Status WriteState(const std::vector<float>& params,
                                  const std::vector<float>* optimizer_state) = 0;

  // Accuracy and mean loss on `data`.
  virtual absl::StatusOr<std::pair<double, double>> Evaluate(const Dataset& data) = 0;
};

// Builds the runner for a model of `widths` (input, hidden..., classes).
using RunnerFactory = std::function<absl::StatusOr<std::unique_ptr<ModelRunner>>(
    const v1::TrainerSpec& spec, const std::vector<int>& widths)>;

// The CPU runner: Mlp on OpenBLAS and the host optimizers.
absl::StatusOr<std::unique_ptr<ModelRunner>> MakeCpuRunner(const v1::TrainerSpec& spec,
                                                           const std::vector<int>& widths);

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_MODEL_RUNNER_H_
