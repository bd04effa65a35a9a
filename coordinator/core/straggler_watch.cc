#include "coordinator/core/straggler_watch.h"

#include <algorithm>

namespace ringmaster {

void StragglerWatch::Report(int rank, absl::Time at, int64_t steps, double seconds,
                            const StragglerOptions& options) {
  std::deque<Sample>& samples = ranks_[rank].samples;
  if (!samples.empty() && steps < samples.back().steps) samples.clear();  // counted anew
  samples.push_back({at, steps, seconds});
  // The oldest sample kept is the last one at or before the window's start.
  while (samples.size() > 2 && samples[1].at <= at - options.window) samples.pop_front();
}

std::vector<StragglerWatch::Figure> StragglerWatch::Evaluate(absl::Time now,
                                                             const StragglerOptions& options) {
  std::vector<Figure> figures;
  for (const auto& [rank, r] : ranks_) {
    if (r.samples.size() < 2) continue;
    const Sample& first = r.samples.front();
    const Sample& last = r.samples.back();
    const int64_t steps = last.steps - first.steps;
    if (steps <= 0 || last.seconds < first.seconds) continue;
    figures.push_back({rank, (last.seconds - first.seconds) / static_cast<double>(steps)});
  }
  if (figures.size() < 2) return figures;
  std::vector<double> per_step;
  for (const Figure& f : figures) per_step.push_back(f.seconds_per_step);
  const size_t middle = (per_step.size() - 1) / 2;  // the lower middle
  std::nth_element(per_step.begin(), per_step.begin() + static_cast<ptrdiff_t>(middle),
                   per_step.end());
  const double median = per_step[middle];
  for (Figure& f : figures) {
    Rank& r = ranks_[f.rank];
    f.ratio = median > 0 ? f.seconds_per_step / median : 0;
    if (f.ratio < options.ratio) {
      r.slow_since = absl::InfiniteFuture();
    } else if (r.slow_since == absl::InfiniteFuture()) {
      r.slow_since = now;
    }
    f.slow_since = r.slow_since;
    f.straggler = now - r.slow_since >= options.after;
  }
  return figures;
}

}  // namespace ringmaster
