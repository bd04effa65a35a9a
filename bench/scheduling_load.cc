#include "bench/scheduling_load.h"

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/fake_clock.h"
#include "common/status_macros.h"
#include "coordinator/core/fake_worker_link.h"
#include "coordinator/jobs/job_manager.h"
#include "coordinator/store/sqlite_job_store.h"

namespace ringmaster {
namespace {

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1, static_cast<size_t>(p * values.size()));
  return values[index];
}

// 50 queues, each guaranteed an equal part of the cluster and allowed
// twice it, with weights 1 to 5; or, for one, the single default queue of
// a coordinator started without --queues.
QueueConfig Queues(const SchedulingLoadOptions& options) {
  QueueConfig config = DefaultQueueConfig();
  if (options.queues <= 1) return config;
  config.queues.clear();
  const int64_t quota = int64_t{options.workers} * options.slots_per_worker / options.queues;
  for (int i = 0; i < options.queues; ++i) {
    QueueSpec queue;
    queue.name = absl::StrCat("team-", i);
    queue.weight = 1 + i % 5;
    queue.quota = {quota, 0};
    queue.limit = {2 * quota, 0};
    config.queues.push_back(queue);
  }
  config.default_queue = "team-0";
  return config;
}

// The queue jobs of the i-th queue name: none with the default queue alone.
std::string QueueName(const SchedulingLoadOptions& options, int i) {
  return options.queues <= 1 ? "" : absl::StrCat("team-", i);
}

v1::JobSpec Spec(const std::string& queue, int ranks, const std::string& priority) {
  v1::JobSpec spec;
  spec.set_name("load");
  spec.set_ranks(ranks);
  spec.add_command("true");
  spec.set_queue(queue);
  spec.set_priority(priority);
  return spec;
}

// Each worker starts the ranks it was sent, says so, and then lists them
// in its heartbeats, as a real worker does: its heartbeat, to send again.
absl::StatusOr<std::vector<v1::Heartbeat>> StartRanks(
    JobManager& manager, const std::vector<WorkerSession>& sessions,
    const std::vector<std::unique_ptr<FakeWorkerLink>>& links) {
  std::vector<v1::Heartbeat> beats(links.size());
  for (size_t w = 0; w < links.size(); ++w) {
    v1::Heartbeat& beat = beats[w];
    int64_t seq = 0;
    for (const v1::CoordinatorMessage& m : links[w]->Take()) {
      if (!m.has_start_rank()) continue;
      const v1::StartRank& start = m.start_rank();
      v1::WorkerMessage started;
      started.set_seq(++seq);
      *started.mutable_rank_started()->mutable_rank() = start.rank();
      started.mutable_rank_started()->set_pid(1000 + seq);
      manager.OnRankEvent(sessions[w], started);
      v1::RunningRank& running = *beat.add_running();
      *running.mutable_rank() = start.rank();
      running.set_slot(start.slot());
      *running.mutable_gpus() = start.gpus();
      running.set_pid(1000 + seq);
    }
    if (!manager.OnHeartbeat(sessions[w], beat)) {
      return absl::InternalError(absl::StrCat("worker ", w, " lost its session"));
    }
  }
  return beats;
}

// Registers the simulated workers, each on a link of its own: in racks of
// options.rack_size (labelled rack=r<n>), each its own host.
absl::StatusOr<std::vector<WorkerSession>> RegisterWorkers(
    JobManager& manager, const SchedulingLoadOptions& options,
    std::vector<std::unique_ptr<FakeWorkerLink>>* links) {
  std::vector<WorkerSession> sessions;
  for (int i = 0; i < options.workers; ++i) {
    links->push_back(std::make_unique<FakeWorkerLink>());
    v1::RegisterWorker r;
    r.set_worker_id(absl::StrCat("w", i));
    r.set_address(absl::StrCat("w", i, ".local:7080"));
    r.set_hostname(absl::StrCat("w", i));
    if (options.rack_size > 0)
      (*r.mutable_labels())["rack"] = absl::StrCat("r", i / options.rack_size);
    r.set_slots(options.slots_per_worker);
    r.set_incarnation("bench");
    for (int p = 0; p < options.slots_per_worker; ++p) r.add_free_ports(40000 + p);
    int64_t ack = 0;
    ASSIGN_OR_RETURN(WorkerSession session, manager.RegisterWorker(links->back().get(), r, &ack));
    sessions.push_back(session);
  }
  return sessions;
}

// The backlog, timing each submit (ms), ticking as the coordinator would
// every 50 ms of submits; with racks, every other job packed by rack.
absl::StatusOr<std::vector<double>> SubmitBacklog(JobManager& manager,
                                                  const SchedulingLoadOptions& options) {
  std::mt19937_64 rng(7);
  std::vector<double> submits;
  absl::Time next_tick = absl::Now() + absl::Milliseconds(50);
  for (int i = 0; i < options.pending; ++i) {
    const std::string queue =
        QueueName(options, std::uniform_int_distribution<int>(0, options.queues - 1)(rng));
    const int ranks = std::uniform_int_distribution<int>(1, 8)(rng);
    const char* priority = std::uniform_int_distribution<int>(0, 1)(rng) ? "low" : "normal";
    v1::JobSpec spec = Spec(queue, ranks, priority);
    if (options.rack_size > 0 && i % 2 == 0) spec.mutable_placement()->set_pack("rack");
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(manager.Submit(spec).status());
    submits.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    if (absl::Now() >= next_tick) {
      manager.Tick();
      next_tick = absl::Now() + absl::Milliseconds(50);
    }
  }
  return submits;
}

}  // namespace

absl::StatusOr<SchedulingLoadResult> RunSchedulingLoad(const SchedulingLoadOptions& options) {
  spdlog::set_level(spdlog::level::warn);  // a line per job would be the run's cost
  ASSIGN_OR_RETURN(std::unique_ptr<JobStore> store,
                   SqliteJobStore::Open(options.state_dir + "/scheduling.db"));
  FakeClock clock;
  RendezvousStore rendezvous(&clock, {});
  std::vector<std::string> levels;
  if (options.rack_size > 0) levels = {"rack", "host"};
  MembershipOptions membership_options;
  membership_options.topology_levels = levels;
  WorkerMembership membership(&clock, membership_options);
  JobManagerOptions manager_options;
  manager_options.queues = Queues(options);
  manager_options.scheduling.topology_levels = levels;
  JobManager manager(store.get(), &rendezvous, &membership, &clock, manager_options);
  RETURN_IF_ERROR(manager.Recover());

  std::vector<std::unique_ptr<FakeWorkerLink>> links;
  ASSIGN_OR_RETURN(const std::vector<WorkerSession> sessions,
                   RegisterWorkers(manager, options, &links));
  // Fill the cluster: each queue runs its quota in whole-worker jobs.
  const int fill = options.workers;
  for (int i = 0; i < fill; ++i) {
    RETURN_IF_ERROR(manager
                        .Submit(Spec(QueueName(options, i % options.queues),
                                     options.slots_per_worker, "normal"))
                        .status());
  }
  manager.Tick();
  ASSIGN_OR_RETURN(const std::vector<v1::Heartbeat> beats, StartRanks(manager, sessions, links));
  ASSIGN_OR_RETURN(const std::vector<double> submits, SubmitBacklog(manager, options));
  // The clock stands still: no worker misses a heartbeat and nothing times
  // out, so each tick does the same work. Between two ticks (50 ms) the
  // twentieth of the workers whose turn it is heartbeat (every second).
  std::vector<double> ticks;
  const size_t per_tick = std::max<size_t>(1, beats.size() / 20);
  size_t next_beat = 0;
  for (int i = 0; i < options.ticks; ++i) {
    for (size_t b = 0; b < per_tick; ++b, next_beat = (next_beat + 1) % beats.size()) {
      manager.OnHeartbeat(sessions[next_beat], beats[next_beat]);
    }
    const absl::Time start = absl::Now();
    manager.Tick();
    ticks.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
  }
  SchedulingLoadResult result;
  for (const auto& [state, count] : manager.CountByState()) {
    if (state == v1::PENDING) result.pending_jobs += count;
    if (state == v1::RUNNING) result.running_jobs += count;
  }
  result.submit_p50_ms = Percentile(submits, 0.5);
  result.submit_p99_ms = Percentile(submits, 0.99);
  result.tick_p50_ms = Percentile(ticks, 0.5);
  result.tick_p99_ms = Percentile(ticks, 0.99);
  result.tick_max_ms = *std::max_element(ticks.begin(), ticks.end());
  return result;
}

}  // namespace ringmaster
