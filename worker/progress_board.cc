#include "worker/progress_board.h"

namespace ringmaster {

void ProgressBoard::Report(const v1::RankProgress& progress) {
  MutexLock lock(&mu_);
  Entry& e = entries_[KeyOf(progress.rank())];
  e.progress = progress;
  e.changed = true;
  ++e.reports;
}

int64_t ProgressBoard::Reports(const v1::RankRef& rank) const {
  MutexLock lock(&mu_);
  auto it = entries_.find(KeyOf(rank));
  return it == entries_.end() ? 0 : it->second.reports;
}

std::vector<v1::RankProgress> ProgressBoard::TakeChanged() {
  MutexLock lock(&mu_);
  std::vector<v1::RankProgress> out;
  for (auto& [key, e] : entries_) {
    if (!e.changed) continue;
    out.push_back(e.progress);
    e.changed = false;
  }
  return out;
}

std::optional<v1::Progress> ProgressBoard::Forget(const v1::RankRef& rank) {
  MutexLock lock(&mu_);
  auto it = entries_.find(KeyOf(rank));
  if (it == entries_.end()) return std::nullopt;
  v1::Progress last = it->second.progress.progress();
  entries_.erase(it);
  return last;
}

std::vector<v1::RankProgress> ProgressBoard::All() const {
  MutexLock lock(&mu_);
  std::vector<v1::RankProgress> out;
  for (const auto& [key, e] : entries_) out.push_back(e.progress);
  return out;
}

}  // namespace ringmaster
