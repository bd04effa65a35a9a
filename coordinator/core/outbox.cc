#include "coordinator/core/outbox.h"

#include <cstdlib>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

namespace ringmaster {

void StoreLost(const std::function<void(const absl::Status&)>& on_lost,
               const absl::Status& status) {
  if (on_lost) on_lost(status);
  spdlog::critical("exiting: a restart recovers the stored state");
  spdlog::default_logger()->flush();
  std::abort();
}

Outbox::Outbox(std::function<absl::Status()> sync, std::function<bool()> synced, Deliver deliver,
               std::function<void(const absl::Status&)> on_lost, bool in_background)
    : sync_(std::move(sync)),
      synced_(std::move(synced)),
      deliver_(std::move(deliver)),
      on_lost_(std::move(on_lost)) {
  if (in_background) watchers_thread_ = std::thread([this] { DeliverInBackground(); });
}

Outbox::~Outbox() { StopBackground(); }

void Outbox::StopBackground() {
  if (!watchers_thread_.joinable()) return;
  {
    MutexLock lock(&background_mu_);
    stopping_ = true;
  }
  watchers_thread_.join();
}

void Outbox::DeliverInBackground() {
  for (;;) {
    std::deque<Item> items;
    {
      MutexLock lock(&background_mu_);
      background_mu_.Await(absl::Condition(this, &Outbox::BackgroundHasWork));
      if (background_.empty()) return;  // stopping, all delivered
      items.swap(background_);
    }
    for (const Item& item : items) {
      MutexLock lock(&mu_);
      DeliverLocked(item);
    }
  }
}

void Outbox::Send(const std::string& worker_id, v1::CoordinatorMessage message) {
  MutexLock lock(&mu_);
  Item item;
  item.seq = next_seq_++;
  item.worker_id = worker_id;
  item.message = std::move(message);
  queue_.push_back(std::move(item));
}

void Outbox::Notify(const v1::Job& job) {
  MutexLock lock(&mu_);
  if (watched_jobs_.count(job.id()) == 0 && watching_all_.empty()) return;
  Item item;
  item.seq = next_seq_++;
  item.job = std::make_shared<const v1::Job>(job);
  queue_.push_back(std::move(item));
}

int64_t Outbox::Watch(const v1::Job& job, Observer observer) {
  MutexLock lock(&mu_);
  const int64_t id = next_watch_id_++;
  Item first;
  first.seq = next_seq_++;
  first.job = std::make_shared<const v1::Job>(job);
  first.only_watch = id;
  watchers_[id] = Watcher{job.id(), first.seq, std::move(observer)};
  watched_jobs_.emplace(job.id(), id);
  queue_.push_back(std::move(first));
  return id;
}

int64_t Outbox::WatchAll(std::vector<v1::Job> first, Observer observer) {
  MutexLock lock(&mu_);
  const int64_t id = next_watch_id_++;
  watchers_[id] = Watcher{"", next_seq_, std::move(observer)};
  watching_all_.insert(id);
  for (v1::Job& job : first) {
    Item item;
    item.seq = next_seq_++;
    item.job = std::make_shared<const v1::Job>(std::move(job));
    item.only_watch = id;
    queue_.push_back(std::move(item));
  }
  return id;
}

void Outbox::Unwatch(int64_t watch_id) {
  MutexLock lock(&mu_);
  auto it = watchers_.find(watch_id);
  if (it == watchers_.end()) return;
  if (watching_all_.erase(watch_id) > 0) {
    watchers_.erase(it);
    return;
  }
  auto [begin, end] = watched_jobs_.equal_range(it->second.job_id);
  for (auto w = begin; w != end; ++w) {
    if (w->second == watch_id) {
      watched_jobs_.erase(w);
      break;
    }
  }
  watchers_.erase(it);
}

void Outbox::Flush() {
  {
    MutexLock lock(&mu_);
    if (queue_.empty() && synced_()) return;  // most heartbeats
  }
  MutexLock flush_lock(&flush_mu_);
  std::deque<Item> items;
  {
    MutexLock lock(&mu_);
    items.swap(queue_);
  }
  // Every change queued above was stored before it was queued.
  if (absl::Status s = sync_(); !s.ok()) {
    spdlog::critical("cannot sync the job store: {}", s.ToString());
    StoreLost(on_lost_, s);
  }
  for (Item& item : items) {
    if (!item.job) {
      deliver_(item.worker_id, item.message);
      continue;
    }
    if (watchers_thread_.joinable()) {
      MutexLock lock(&background_mu_);
      background_mu_.Await(absl::Condition(this, &Outbox::BackgroundHasRoom));
      background_.push_back(std::move(item));
      continue;
    }
    MutexLock lock(&mu_);
    DeliverLocked(item);
  }
}

void Outbox::DeliverLocked(const Item& item) {
  if (item.only_watch != 0) {
    auto it = watchers_.find(item.only_watch);
    if (it != watchers_.end()) it->second.observer(*item.job);
    return;
  }
  auto [begin, end] = watched_jobs_.equal_range(item.job->id());
  for (auto w = begin; w != end; ++w) {
    const Watcher& watcher = watchers_.at(w->second);
    if (watcher.since < item.seq) watcher.observer(*item.job);
  }
  for (int64_t id : watching_all_) {
    const Watcher& watcher = watchers_.at(id);
    if (watcher.since <= item.seq && item.only_watch == 0) watcher.observer(*item.job);
  }
}

}  // namespace ringmaster
