#include "coordinator/worker_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringmaster {

WorkerRecord& WorkerRegistry::Register(const v1::RegisterWorker& request,
                                       WorkerLink* link) {
  auto [it, inserted] = workers_.try_emplace(request.worker_id());
  WorkerRecord& w = it->second;
  if (inserted) w.order = next_order_++;
  w.info.set_id(request.worker_id());
  w.info.set_address(request.address());
  w.info.set_hostname(request.hostname());
  w.info.set_slots(request.slots());
  *w.info.mutable_gpus() = request.gpus();
  w.info.set_state(v1::WORKER_STATE_ALIVE);
  w.link = link;
  w.last_heartbeat = clock_->Now();
  w.free_ports.assign(request.free_ports().begin(), request.free_ports().end());
  return w;
}

void WorkerRegistry::Expect(const std::string& worker_id,
                            const std::string& address) {
  auto [it, inserted] = workers_.try_emplace(worker_id);
  if (!inserted) return;
  it->second.order = next_order_++;
  it->second.info.set_id(worker_id);
  it->second.info.set_address(address);
  it->second.info.set_state(v1::WORKER_STATE_ALIVE);
  it->second.last_heartbeat = clock_->Now();
}

absl::Status WorkerRegistry::Heartbeat(const std::string& worker_id,
                                       const v1::Heartbeat& beat) {
  WorkerRecord* w = Find(worker_id);
  if (w == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown worker ", worker_id));
  }
  w->last_heartbeat = clock_->Now();
  if (beat.free_ports_size() > 0) {
    w->free_ports.assign(beat.free_ports().begin(), beat.free_ports().end());
  }
  *w->info.mutable_gpu_usage() = beat.gpu_usage();
  w->info.set_cpu_utilization_ratio(beat.cpu_utilization_ratio());
  return absl::OkStatus();
}

void WorkerRegistry::Disconnect(const std::string& worker_id,
                                const WorkerLink* link) {
  WorkerRecord* w = Find(worker_id);
  if (w != nullptr && w->link == link) w->link = nullptr;
}

std::vector<std::string> WorkerRegistry::ExpireLost() {
  std::vector<std::string> lost;
  const absl::Time now = clock_->Now();
  for (auto& [id, w] : workers_) {
    if (w.info.state() == v1::WORKER_STATE_ALIVE &&
        now - w.last_heartbeat > heartbeat_timeout_) {
      w.info.set_state(v1::WORKER_STATE_LOST);
      w.link = nullptr;
      lost.push_back(id);
    }
  }
  return lost;
}

WorkerRecord* WorkerRegistry::Find(const std::string& worker_id) {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? nullptr : &it->second;
}

std::vector<const WorkerRecord*> WorkerRegistry::Schedulable() const {
  std::vector<const WorkerRecord*> out;
  for (const auto& [id, w] : workers_) {
    if (w.info.state() == v1::WORKER_STATE_ALIVE && w.link != nullptr) {
      out.push_back(&w);
    }
  }
  std::sort(out.begin(), out.end(), [](const WorkerRecord* a, const WorkerRecord* b) {
    return a->order < b->order;
  });
  return out;
}

std::vector<v1::Worker> WorkerRegistry::List() const {
  std::vector<std::pair<int64_t, v1::Worker>> ordered;
  const absl::Time now = clock_->Now();
  for (const auto& [id, w] : workers_) {
    v1::Worker info = w.info;
    if (info.state() == v1::WORKER_STATE_ALIVE && w.link == nullptr) {
      info.set_state(v1::WORKER_STATE_DISCONNECTED);
    }
    info.set_last_heartbeat_unix_ms(absl::ToUnixMillis(w.last_heartbeat));
    info.set_heartbeat_age_seconds(absl::ToDoubleSeconds(now - w.last_heartbeat));
    ordered.emplace_back(w.order, std::move(info));
  }
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<v1::Worker> out;
  for (auto& [order, info] : ordered) out.push_back(std::move(info));
  return out;
}

absl::StatusOr<int> WorkerRegistry::PickFreePort(const std::string& worker_id,
                                                 const std::set<int>& in_use) const {
  auto it = workers_.find(worker_id);
  if (it != workers_.end()) {
    for (int port : it->second.free_ports) {
      if (in_use.count(port) == 0) return port;
    }
  }
  return absl::FailedPreconditionError(
      absl::StrCat("worker ", worker_id, " reported no free port for MASTER_PORT"));
}

}  // namespace ringmaster
