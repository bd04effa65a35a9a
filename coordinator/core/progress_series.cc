#include "coordinator/core/progress_series.h"

namespace ringmaster {

void ProgressSeries::Add(const v1::Progress& progress, int attempt, int64_t time_unix_ms) {
  if (progress.step() <= 0) return;
  if (!points_.empty() && points_.back().attempt() == attempt &&
      progress.step() <= points_.back().step()) {
    return;
  }
  if (reports_++ % stride_ != 0) return;
  if (points_.size() == kMaxPoints) {
    // Every other point goes, and from now on every other report.
    size_t kept = 0;
    for (size_t i = 0; i < points_.size(); i += 2) points_[kept++] = points_[i];
    points_.resize(kept);
    stride_ *= 2;
  }
  v1::ProgressPoint& point = points_.emplace_back();
  point.set_step(progress.step());
  point.set_time_unix_ms(time_unix_ms);
  point.set_attempt(attempt);
  point.set_loss(progress.loss());
  point.set_eval_accuracy(progress.eval_accuracy());
  point.set_samples_per_second(progress.samples_per_second());
  if (progress.allreduce_seconds() > 0) {
    point.set_allreduce_mb_per_s(progress.allreduce_bytes() / 1e6 / progress.allreduce_seconds());
  }
}

}  // namespace ringmaster
