#include "worker/event_outbox.h"

#include <algorithm>

namespace ringmaster {

v1::WorkerMessage EventOutbox::Add(v1::WorkerMessage event) {
  MutexLock lock(&mu_);
  event.set_seq(next_seq_++);
  pending_.push_back(event);
  return event;
}

void EventOutbox::Acknowledge(int64_t seq) {
  MutexLock lock(&mu_);
  while (!pending_.empty() && pending_.front().seq() <= seq) {
    if (pending_.front().has_rank_exited()) {
      recent_exits_.push_back(std::move(pending_.front()));
      if (recent_exits_.size() > kRecentExits) recent_exits_.pop_front();
    }
    pending_.pop_front();
  }
}

std::vector<v1::WorkerMessage> EventOutbox::Unacknowledged() const {
  MutexLock lock(&mu_);
  return {pending_.begin(), pending_.end()};
}

std::optional<v1::WorkerMessage> EventOutbox::FindExit(const v1::RankRef& rank) const {
  MutexLock lock(&mu_);
  auto same = [&rank](const v1::WorkerMessage& m) {
    if (!m.has_rank_exited()) return false;
    const v1::RankRef& r = m.rank_exited().rank();
    return r.job_id() == rank.job_id() && r.attempt() == rank.attempt() && r.rank() == rank.rank();
  };
  for (const auto* events : {&pending_, &recent_exits_}) {
    auto it = std::find_if(events->rbegin(), events->rend(), same);
    if (it == events->rend()) continue;
    v1::WorkerMessage found = *it;
    found.clear_seq();
    return found;
  }
  return std::nullopt;
}

}  // namespace ringmaster
