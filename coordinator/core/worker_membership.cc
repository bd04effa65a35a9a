#include "coordinator/core/worker_membership.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/labels.h"

namespace ringmaster {
namespace {

std::tuple<std::string, int, int> KeyOf(const v1::RankRef& r) {
  return {r.job_id(), r.attempt(), r.rank()};
}

// "ALIVE", "SUSPECT", "LOST" from the proto's own names.
std::string StateWord(v1::WorkerState state) {
  return v1::WorkerState_Name(state).substr(sizeof("WORKER_STATE_") - 1);
}

}  // namespace

WorkerMembership::WorkerMembership(const Clock* clock, MembershipOptions options)
    : clock_(clock), options_(options) {}

WorkerMembership::Member* WorkerMembership::Find(const std::string& worker_id) {
  auto it = members_.find(worker_id);
  return it == members_.end() ? nullptr : &it->second;
}

const WorkerMembership::Member* WorkerMembership::Find(const std::string& worker_id) const {
  auto it = members_.find(worker_id);
  return it == members_.end() ? nullptr : &it->second;
}

WorkerMembership::Member* WorkerMembership::Current(const WorkerSession& session) {
  Member* m = Find(session.worker_id);
  return m != nullptr && m->info.session() == session.epoch ? m : nullptr;
}

void WorkerMembership::SetState(Member& m, v1::WorkerState state, const std::string& reason) {
  if (m.info.state() != state) {
    const std::string why = reason.empty() ? "" : absl::StrCat(": ", reason);
    if (state == v1::WORKER_STATE_ALIVE) {
      spdlog::info("worker {} is ALIVE{}", m.info.id(), why);
    } else {
      spdlog::warn("worker {} is {}{}", m.info.id(), StateWord(state), why);
    }
  }
  m.info.set_state(state);
  m.info.set_state_reason(reason);
}

absl::StatusOr<WorkerSession> WorkerMembership::Register(WorkerLink* link,
                                                         const v1::RegisterWorker& request) {
  MutexLock lock(&mu_);
  auto [it, inserted] = members_.try_emplace(request.worker_id());
  Member& m = it->second;
  if (m.link != nullptr) {
    return absl::AlreadyExistsError(
        absl::StrCat("worker id \"", request.worker_id(), "\" is held by the worker at ",
                     m.info.address(), " (session ", m.info.session(),
                     ", its stream still open); give this worker another --id, or stop that one"));
  }
  if (inserted) in_order_.push_back(&m);
  const bool new_incarnation = m.incarnation.empty() || m.incarnation != request.incarnation();
  if (new_incarnation) {
    m.incarnation = request.incarnation();
    m.applied_seq = 0;
  }
  m.info.set_id(request.worker_id());
  m.info.set_address(request.address());
  m.info.set_hostname(request.hostname());
  m.info.set_slots(request.slots());
  *m.info.mutable_gpus() = request.gpus();
  *m.info.mutable_labels() = request.labels();
  if (!request.gpus().empty() && m.info.labels().count("gpu_type") == 0) {
    (*m.info.mutable_labels())["gpu_type"] = LabelValueOf(request.gpus(0).name());
  }
  PlaceInTopology(m);
  m.info.set_cpus(request.cpus());
  m.info.set_memory_mb(request.memory_mb());
  m.info.set_session(m.info.session() + 1);
  m.link = link;
  m.admitted = false;
  m.last_heartbeat = clock_->Now();
  m.lose_at = absl::InfiniteFuture();
  m.free_ports.assign(request.free_ports().begin(), request.free_ports().end());
  m.running.clear();
  for (const v1::RunningRank& r : request.running()) m.running[KeyOf(r.rank())] = r;
  m.running_list.reset();
  m.listed_at = ++list_changes_;
  ++m.reports;
  SetState(m, v1::WORKER_STATE_ALIVE, "");
  return WorkerSession{m.info.id(), m.info.session(), m.incarnation, new_incarnation};
}

void WorkerMembership::Admit(const WorkerSession& session) {
  MutexLock lock(&mu_);
  if (Member* m = Current(session)) m->admitted = true;
}

void WorkerMembership::Disconnect(const WorkerLink* link) {
  MutexLock lock(&mu_);
  for (auto& [id, m] : members_) {
    if (m.link != link) continue;
    m.link = nullptr;
    m.admitted = false;
    m.lose_at = clock_->Now() + options_.worker_grace;
    if (m.info.state() != v1::WORKER_STATE_LOST) {
      SetState(m, v1::WORKER_STATE_SUSPECT, "its stream broke");
    }
  }
}

bool WorkerMembership::Heartbeat(const WorkerSession& session, const v1::Heartbeat& beat,
                                 bool* revived) {
  MutexLock lock(&mu_);
  *revived = false;
  Member* m = Current(session);
  if (m == nullptr || m->link == nullptr) return false;
  m->last_heartbeat = clock_->Now();
  if (beat.free_ports_size() > 0) {
    m->free_ports.assign(beat.free_ports().begin(), beat.free_ports().end());
  }
  *m->info.mutable_gpu_usage() = beat.gpu_usage();
  m->info.set_cpu_utilization_ratio(beat.cpu_utilization_ratio());
  *m->info.mutable_images() = beat.images();
  m->running.clear();
  for (const v1::RunningRank& r : beat.running()) m->running[KeyOf(r.rank())] = r;
  m->running_list.reset();
  m->listed_at = ++list_changes_;
  ++m->reports;
  *revived = m->info.state() == v1::WORKER_STATE_LOST;
  Evaluate(*m, clock_->Now());
  return true;
}

EventVerdict WorkerMembership::AcceptEvent(const WorkerSession& session,
                                           const v1::WorkerMessage& message) {
  MutexLock lock(&mu_);
  Member* m = Current(session);
  if (m == nullptr) return EventVerdict::kStale;
  if (message.seq() <= m->applied_seq) return EventVerdict::kDuplicate;
  m->applied_seq = message.seq();
  // An exited rank's slot is free now, not at the next heartbeat.
  if (message.has_rank_exited() && m->running.erase(KeyOf(message.rank_exited().rank())) > 0) {
    m->running_list.reset();
    m->listed_at = ++list_changes_;
  }
  return EventVerdict::kApply;
}

std::vector<std::optional<WorkerMembership::Sighting>> WorkerMembership::Sightings(
    const v1::Job& job) const {
  const int ranks = job.ranks_size();
  std::vector<std::optional<Sighting>> out(ranks);
  std::vector<const Member*> listed_by(ranks, nullptr);
  MutexLock lock(&mu_);
  const Member* m = nullptr;  // a job's ranks on one worker come one after another
  for (int r = 0; r < ranks; ++r) {
    const v1::RankStatus& rank = job.ranks(r);
    if (rank.state() != v1::RANK_RUNNING) continue;
    if (m == nullptr || m->info.id() != rank.worker_id()) {
      m = Find(rank.worker_id());
      if (m == nullptr) continue;
      // What the worker's report lists of this attempt, in one walk.
      for (auto it = m->running.lower_bound(RankKeyView{job.id(), job.attempt(), 0});
           it != m->running.end() && std::get<1>(it->first) == job.attempt() &&
           std::get<0>(it->first) == job.id();
           ++it) {
        const int listed = std::get<2>(it->first);
        if (listed >= 0 && listed < ranks) listed_by[listed] = m;
      }
    }
    out[r] = Sighting{m->reports, listed_by[r] == m};
  }
  return out;
}

absl::flat_hash_set<std::string> WorkerMembership::ListsChangedSince(int64_t* since) const {
  absl::flat_hash_set<std::string> changed;
  MutexLock lock(&mu_);
  for (const auto& [id, m] : members_) {
    if (m.listed_at > *since) changed.insert(id);
  }
  *since = list_changes_;
  return changed;
}

bool WorkerMembership::Evaluate(Member& m, absl::Time now) {
  const v1::WorkerState before = m.info.state();
  if (m.link == nullptr) {
    if (now >= m.lose_at) {
      if (before != v1::WORKER_STATE_LOST) {
        SetState(m, v1::WORKER_STATE_LOST,
                 m.info.state_reason().empty()
                     ? "it did not come back"
                     : absl::StrCat(m.info.state_reason(), " and it did not come back"));
      }
    } else if (before == v1::WORKER_STATE_ALIVE) {
      SetState(m, v1::WORKER_STATE_SUSPECT, "it has no stream");
    }
  } else {
    const absl::Duration age = now - m.last_heartbeat;
    if (age >= options_.heartbeat_timeout) {
      if (before != v1::WORKER_STATE_LOST) {
        SetState(m, v1::WORKER_STATE_LOST,
                 absl::StrCat("no heartbeat for ", absl::FormatDuration(age)));
      }
    } else if (age > 2 * options_.heartbeat_interval) {
      if (before == v1::WORKER_STATE_ALIVE) {
        SetState(
            m, v1::WORKER_STATE_SUSPECT,
            absl::StrCat("heartbeats late: the last came ", absl::FormatDuration(age), " ago"));
      }
    } else {
      SetState(m, v1::WORKER_STATE_ALIVE, "");
    }
  }
  return before != v1::WORKER_STATE_LOST && m.info.state() == v1::WORKER_STATE_LOST;
}

std::vector<LostWorker> WorkerMembership::Expire() {
  MutexLock lock(&mu_);
  std::vector<LostWorker> lost;
  const absl::Time now = clock_->Now();
  for (auto& [id, m] : members_) {
    if (Evaluate(m, now)) lost.push_back({id, m.info.state_reason()});
  }
  std::sort(lost.begin(), lost.end(),
            [](const LostWorker& a, const LostWorker& b) { return a.worker_id < b.worker_id; });
  return lost;
}

void WorkerMembership::Expect(const std::string& worker_id, const std::string& address) {
  MutexLock lock(&mu_);
  auto [it, inserted] = members_.try_emplace(worker_id);
  if (!inserted) return;
  Member& m = it->second;
  in_order_.push_back(&m);
  m.info.set_id(worker_id);
  m.info.set_address(address);
  m.last_heartbeat = clock_->Now();
  m.lose_at = clock_->Now() + options_.heartbeat_timeout;
  SetState(m, v1::WORKER_STATE_SUSPECT, "not registered since the coordinator started");
}

bool WorkerMembership::Send(const std::string& worker_id, const v1::CoordinatorMessage& message) {
  MutexLock lock(&mu_);
  Member* m = Find(worker_id);
  if (m == nullptr || m->link == nullptr) return false;
  m->link->Send(message);
  return true;
}

bool WorkerMembership::Connected(const std::string& worker_id) const {
  MutexLock lock(&mu_);
  const Member* m = Find(worker_id);
  return m != nullptr && m->link != nullptr;
}

bool WorkerMembership::Answering(const std::string& worker_id) const {
  MutexLock lock(&mu_);
  const Member* m = Find(worker_id);
  return m != nullptr && m->link != nullptr && m->info.state() == v1::WORKER_STATE_ALIVE;
}

std::string WorkerMembership::Address(const std::string& worker_id) const {
  MutexLock lock(&mu_);
  const Member* m = Find(worker_id);
  return m == nullptr ? "" : m->info.address();
}

bool WorkerMembership::Known(const std::string& worker_id) const {
  MutexLock lock(&mu_);
  return Find(worker_id) != nullptr;
}

int WorkerMembership::Size() const {
  MutexLock lock(&mu_);
  return static_cast<int>(members_.size());
}

std::vector<SchedulableWorker> WorkerMembership::Schedulable() const {
  MutexLock lock(&mu_);
  std::vector<const Member*> ordered;
  ordered.reserve(in_order_.size());
  for (const Member* m : in_order_) {
    if (m->info.state() == v1::WORKER_STATE_ALIVE && m->link != nullptr && m->admitted) {
      ordered.push_back(m);
    }
  }
  std::vector<SchedulableWorker> out(ordered.size());
  for (size_t i = 0; i < ordered.size(); ++i) {
    const Member& m = *ordered[i];
    SchedulableWorker& w = out[i];
    w.worker_id = m.info.id();
    w.incarnation = m.incarnation;
    w.slots = m.info.slots();
    for (const v1::Gpu& gpu : m.info.gpus()) w.gpu_indices.push_back(gpu.index());
    if (m.running_list == nullptr) {  // in job order: `running` is by job
      std::vector<const v1::RunningRank*> ranks;
      for (const auto& [key, rank] : m.running) ranks.push_back(&rank);
      m.running_list = std::make_shared<const ReportedRanks>(Report(ranks, w.gpu_indices));
    }
    w.running = m.running_list;
    w.labels = m.labels;
    w.cpus = m.info.cpus();
    w.memory_mb = m.info.memory_mb();
    w.domains = m.domains;
  }
  return out;
}

void WorkerMembership::PlaceInTopology(Member& m) {
  const std::vector<std::string>& levels = options_.topology_levels;
  m.domains.assign(levels.size(), -1);
  m.info.clear_topology();
  std::string path;
  for (size_t level = 0; level < levels.size(); ++level) {
    auto label = m.info.labels().find(levels[level]);
    std::string value = label != m.info.labels().end() ? label->second : "";
    if (value.empty() && levels[level] == "host") value = m.info.hostname();
    absl::StrAppend(&path, level == 0 ? "" : "/", value);
    if (value.empty()) continue;
    (*m.info.mutable_topology())[levels[level]] = value;
    auto [it, added] =
        domain_ids_.try_emplace(absl::StrCat(level, ":", path), domain_names_.size());
    if (added) domain_names_.emplace_back(static_cast<int>(level), path);
    m.domains[level] = it->second;
  }
  // A job's worker_selector may name a domain (host: its hostname).
  SharedLabels::Map labels(m.info.labels().begin(), m.info.labels().end());
  labels.insert(m.info.topology().begin(), m.info.topology().end());
  m.labels = std::move(labels);
}

std::pair<int, std::string> WorkerMembership::Domain(int domain) const {
  MutexLock lock(&mu_);
  if (domain < 0 || domain >= static_cast<int>(domain_names_.size())) return {-1, ""};
  return domain_names_[domain];
}

std::vector<v1::Worker> WorkerMembership::List() const {
  MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  std::vector<v1::Worker> out;
  out.reserve(in_order_.size());
  for (const Member* m : in_order_) {
    v1::Worker& info = out.emplace_back(m->info);
    info.set_last_heartbeat_unix_ms(absl::ToUnixMillis(m->last_heartbeat));
    info.set_heartbeat_age_seconds(absl::ToDoubleSeconds(now - m->last_heartbeat));
  }
  return out;
}

absl::StatusOr<int> WorkerMembership::PickFreePort(const std::string& worker_id,
                                                   const std::set<int>& in_use) const {
  MutexLock lock(&mu_);
  if (const Member* m = Find(worker_id)) {
    for (int port : m->free_ports) {
      if (in_use.count(port) == 0) return port;
    }
  }
  return absl::FailedPreconditionError(
      absl::StrCat("worker ", worker_id, " reported no free port for MASTER_PORT"));
}

}  // namespace ringmaster
