#include "worker/event_outbox.h"

namespace ringmaster {

v1::WorkerMessage EventOutbox::Add(v1::WorkerMessage event) {
  MutexLock lock(&mu_);
  event.set_seq(next_seq_++);
  pending_.push_back(event);
  return event;
}

void EventOutbox::Acknowledge(int64_t seq) {
  MutexLock lock(&mu_);
  while (!pending_.empty() && pending_.front().seq() <= seq) pending_.pop_front();
}

std::vector<v1::WorkerMessage> EventOutbox::Unacknowledged() const {
  MutexLock lock(&mu_);
  return {pending_.begin(), pending_.end()};
}

}  // namespace ringmaster
