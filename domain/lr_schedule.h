// The learning rate schedule of the built-in trainer: what the trainer
// steps by and what `ringmaster status` shows a job's rate to be.
#ifndef RINGMASTER_DOMAIN_LR_SCHEDULE_H_
#define RINGMASTER_DOMAIN_LR_SCHEDULE_H_

#include <cstdint>
#include <string>

namespace ringmaster {

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

  // base_lr scaled by the world size: the rate after warm-up.
  double Peak() const;
  double At(int64_t step) const;
};

}  // namespace ringmaster

#endif  // RINGMASTER_DOMAIN_LR_SCHEDULE_H_
