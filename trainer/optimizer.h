// Optimizers over the flat parameter buffer, and the learning-rate
// schedule. Semantics follow PyTorch's SGD (with momentum) and AdamW.
#ifndef RINGMASTER_TRAINER_OPTIMIZER_H_
#define RINGMASTER_TRAINER_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "domain/lr_schedule.h"
#include "proto/job.pb.h"

namespace ringmaster {

// Where a step reads and writes, each buffer indexed from parameter 0 (the
// state as planes of the parameter count, see mutable_state): it reads
// `params` and `state` and writes the new values to `params_out` and
// `state_out`, which are the same buffers for an update in place, or
// others (a snapshot's slot) that it then leaves the inputs as they were.
struct OptimizerBuffers {
  const float* params;
  const float* state;
  float* params_out;
  float* state_out;
};

// A step is BeginStep, then Update over ranges that together cover every
// parameter once; the ranges may be updated from another thread than the
// one that began the step (the reducer's, as each bucket is reduced), one
// range at a time, never two overlapping ranges at once.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Starts a step at learning rate `lr`; the gradients are multiplied by
  // `grad_scale` (1 / world size, times a clipping factor) in the same pass
  // as the update rather than in one of their own.
  virtual void BeginStep(float lr, float grad_scale) = 0;
  // Updates [offset, offset + n) from grads of the same range.
  virtual void UpdateInto(size_t offset, size_t n, const float* grads,
                          const OptimizerBuffers& b) = 0;
  // In place, over params and the optimizer's own state.
  void Update(size_t offset, size_t n, float* params, const float* grads) {
    float* state = mutable_state()->data();
    UpdateInto(offset, n, grads, {params, state, params, state});
  }
  // The whole step at once.
  void Step(float* params, const float* grads, size_t n, float lr, float grad_scale = 1.0f) {
    BeginStep(lr, grad_scale);
    Update(0, n, params, grads);
  }
  // The state a checkpoint must hold: none, a momentum, or AdamW's two
  // moments, each a plane of one float per parameter. The step count is
  // steps().
  virtual std::vector<float>* mutable_state() = 0;
  virtual int64_t steps() const = 0;
  virtual void set_steps(int64_t steps) = 0;
};

// From the spec's optimizer section (type sgd or adamw), for n parameters.
std::unique_ptr<Optimizer> MakeOptimizer(const v1::TrainerSpec::Optimizer& spec, size_t n);

// The L2 norm of `grads`.
double GradNorm(const float* grads, size_t n);

// The factor that brings a gradient of L2 norm `norm` to at most
// `max_norm` (1 when it is within, or when max_norm <= 0).
double ClipFactor(double norm, double max_norm);

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_OPTIMIZER_H_
