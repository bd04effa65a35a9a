#include "domain/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace ringmaster {
namespace {

constexpr double kPi = 3.14159265358979323846;

}  // namespace

double LrSchedule::Peak() const {
  if (scaling == "linear") return base_lr * world_size;
  if (scaling == "sqrt") return base_lr * std::sqrt(static_cast<double>(world_size));
  return base_lr;
}

double LrSchedule::At(int64_t step) const {
  const double lr = Peak();
  if (step < warmup_steps) return lr * static_cast<double>(step + 1) / (warmup_steps + 1);
  const int64_t decay_steps = total_steps - warmup_steps;
  if (decay_steps <= 0) return lr;
  const double progress = std::min(1.0, static_cast<double>(step - warmup_steps) / decay_steps);
  return lr * 0.5 * (1 + std::cos(kPi * progress));
}

}  // namespace ringmaster
