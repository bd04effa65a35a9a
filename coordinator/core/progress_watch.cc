#include "coordinator/core/progress_watch.h"

#include <tuple>

namespace ringmaster {

void ProgressWatch::Begin(Kind kind, int ranks, absl::Time now) {
  kind_ = kind;
  began_ = now;
  progressed_ = false;
  ranks_.assign(ranks, Rank{});
  for (Rank& r : ranks_) r.last_progress = r.last_seen = now;
}

void ProgressWatch::Started(int rank) {
  if (rank >= 0 && rank < static_cast<int>(ranks_.size())) ranks_[rank].started = true;
}

std::vector<int> ProgressWatch::NotStarted() const {
  std::vector<int> out;
  for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
    if (!ranks_[r].started) out.push_back(r);
  }
  return out;
}

void ProgressWatch::Saw(Rank& r, bool progress, absl::Time now) {
  r.last_seen = now;
  if (progress) {
    r.last_progress = now;
    progressed_ = true;
  }
}

void ProgressWatch::Step(int rank, int64_t step, absl::Time now) {
  if (rank < 0 || rank >= static_cast<int>(ranks_.size())) return;
  Rank& r = ranks_[rank];
  // The first report only tells where the rank starts (a checkpoint's step).
  const bool advanced = r.step >= 0 && step > r.step;
  if (step != r.step) Saw(r, advanced, now);
  r.step = step;
}

void ProgressWatch::Regrouped(absl::Time now) {
  for (Rank& r : ranks_) Saw(r, true, now);
}

void ProgressWatch::Left(int rank) {
  if (rank >= 0 && rank < static_cast<int>(ranks_.size())) ranks_[rank].left = true;
}

void ProgressWatch::Activity(int rank, int64_t output_bytes, int64_t reports, absl::Time now) {
  if (rank < 0 || rank >= static_cast<int>(ranks_.size())) return;
  Rank& r = ranks_[rank];
  if (output_bytes == r.output_bytes && reports == r.reports) return;
  Saw(r, kind_ == Kind::kCommand, now);
  r.output_bytes = output_bytes;
  r.reports = reports;
}

std::optional<ProgressWatch::Hang> ProgressWatch::Hung(absl::Duration timeout,
                                                       absl::Time now) const {
  if (ranks_.empty() || timeout <= absl::ZeroDuration()) return std::nullopt;
  absl::Time latest = absl::InfinitePast();
  for (const Rank& r : ranks_) latest = std::max(latest, r.last_progress);
  if (now - latest < timeout) return std::nullopt;
  int culprit = -1;
  auto order = [this](int i) { return std::make_tuple(ranks_[i].last_seen, ranks_[i].step, i); };
  for (int i = 0; i < static_cast<int>(ranks_.size()); ++i) {
    if (!ranks_[i].left && (culprit < 0 || order(i) < order(culprit))) culprit = i;
  }
  if (culprit < 0) return std::nullopt;
  return Hang{culprit, ranks_[culprit].step, now - latest};
}

}  // namespace ringmaster
