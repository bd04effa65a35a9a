// Optimizers over the flat parameter buffer, and the learning-rate
// schedule. Semantics follow PyTorch's SGD (with momentum) and AdamW.
#ifndef RINGMASTER_TRAINER_OPTIMIZER_H_
#define RINGMASTER_TRAINER_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "proto/job.pb.h"

namespace ringmaster {

// Not thread-safe.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of `params` from `grads` at learning rate `lr`.
  virtual void Step(float* params, const float* grads, size_t n, float lr) = 0;
  // The state a checkpoint must hold (momentum, moments, step count).
  virtual std::vector<float>* mutable_state() = 0;
  virtual int64_t steps() const = 0;
  virtual void set_steps(int64_t steps) = 0;
};

// From the spec's optimizer section (type sgd or adamw), for n parameters.
std::unique_ptr<Optimizer> MakeOptimizer(const v1::TrainerSpec::Optimizer& spec, size_t n);

// The learning rate at optimizer step `step` (0-based): the base rate
// scaled by world size (linear: x world, sqrt: x sqrt(world), none), linear
// warm-up from 0 over `warmup_steps`, then cosine decay to 0 at
// `total_steps`.
struct LrSchedule {
  double base_lr = 1e-3;
  std::string scaling = "linear";
  int world_size = 1;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;

  double At(int64_t step) const;
};

// Scales `grads` so that their global L2 norm is at most `max_norm`;
// returns the norm before clipping. No-op when max_norm <= 0.
double ClipGradNorm(float* grads, size_t n, double max_norm);

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_OPTIMIZER_H_
