// A JobManager over a real SQLite store, a fake clock and fake worker
// streams, for the JobManager's tests: workers register, heartbeat and
// report rank events as a worker's stream would.
#ifndef RINGMASTER_COORDINATOR_JOBS_JOB_MANAGER_FIXTURE_H_
#define RINGMASTER_COORDINATOR_JOBS_JOB_MANAGER_FIXTURE_H_

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "common/fake_clock.h"
#include "coordinator/core/fake_worker_link.h"
#include "coordinator/jobs/job_manager.h"
#include "coordinator/store/sqlite_job_store.h"
#include "testing/status_matchers.h"

namespace ringmaster {

// A worker as the coordinator sees it: its stream (a FakeWorkerLink), its
// session, and the numbers of its rank events.
// The ids of a page's jobs, in its order.
inline std::vector<std::string> Ids(const JobPage& page) {
  std::vector<std::string> ids;
  for (const v1::Job& job : page.jobs) ids.push_back(job.id());
  return ids;
}

// A built-in trainer job of `ranks` ranks on the digits data.
inline v1::JobSpec TrainerSpec(int ranks, int max_restarts) {
  v1::JobSpec spec;
  spec.set_name("train");
  spec.set_ranks(ranks);
  spec.set_max_restarts(max_restarts);
  spec.mutable_trainer()->set_epochs(1);
  spec.mutable_trainer()->mutable_data()->set_path("digits");
  spec.mutable_trainer()->mutable_model()->add_hidden(8);
  spec.mutable_trainer()->set_batch_size(4);
  spec.mutable_trainer()->mutable_optimizer()->set_type("sgd");
  spec.mutable_trainer()->mutable_optimizer()->set_lr(0.1);
  return spec;
}

// A job of `ranks` ranks running `true`.
inline v1::JobSpec CommandSpec(int ranks) {
  v1::JobSpec spec;
  spec.set_name("policy");
  spec.set_ranks(ranks);
  spec.add_command("true");
  return spec;
}

struct TestWorker {
  std::string id;
  std::string incarnation;  // its process; a new TestWorker is a new process
  FakeWorkerLink link;
  WorkerSession session;
  int64_t seq = 0;
  int64_t acked = 0;
  std::vector<std::string> logs_of;           // jobs whose logs it holds, told at registration
  std::map<std::string, std::string> labels;  // registered, as --label gives them
  int cpus = 0;
  int64_t memory_mb = 0;
  std::vector<int> gpus;                // NVML indices, one slot each; empty: a CPU worker
  std::vector<v1::HeldSnapshots> held;  // the snapshots its heartbeats list
  // What its heartbeats list: the ranks it registered with and those
  // started since, until they exit.
  std::map<std::tuple<std::string, int, int>, v1::RunningRank> running;
};

class JobManagerTest : public ::testing::Test {
 protected:
  JobManagerTest() : rendezvous_(&clock_) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    db_path_ = std::string(tmp ? tmp : "/tmp") + "/" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".db";
    std::filesystem::remove(db_path_);
    membership_options_.heartbeat_timeout = absl::Seconds(5);
    membership_options_.worker_grace = absl::Seconds(3);
    options_.backoff.base = absl::Seconds(2);
    options_.random = [] { return 0.999999; };  // the longest wait of each back-off
    options_.rank_env = {"127.0.0.1:7070", "/ckpt"};
    Restart();
  }

  // A fresh manager over the same database, as after a coordinator restart.
  void Restart() {
    live_.clear();
    manager_.reset();
    membership_.reset();
    store_.reset();
    auto store = SqliteJobStore::Open(db_path_);
    ASSERT_OK(store) << store.status();
    store_ = *std::move(store);
    membership_ = std::make_unique<WorkerMembership>(&clock_, membership_options_);
    manager_ = std::make_unique<JobManager>(store_.get(), &rendezvous_, membership_.get(), &clock_,
                                            options_);
    ASSERT_OK(manager_->Recover());
  }

  static v1::RunningRank Running(const std::string& job, int attempt, int rank, int slot = 0) {
    v1::RunningRank r;
    *r.mutable_rank() = Ref(job, attempt, rank);
    r.set_slot(slot);
    return r;
  }

  absl::Status Register(TestWorker& w, const std::string& id, int slots,
                        std::vector<v1::RunningRank> running = {},
                        std::vector<v1::WorkerMessage> unacked = {},
                        const std::string& incarnation = "") {
    w.id = id;
    if (!incarnation.empty()) w.incarnation = incarnation;
    if (w.incarnation.empty()) w.incarnation = id + "-process-" + std::to_string(++processes_);
    v1::RegisterWorker r;
    r.set_worker_id(id);
    r.set_address(id + ".local:7080");
    r.set_slots(slots);
    r.set_incarnation(w.incarnation);
    for (int i = 0; i < 3; ++i) r.add_free_ports(40000 + static_cast<int>(id.back()) + 100 * i);
    w.running.clear();
    for (auto& rank : running) {
      *r.add_running() = rank;
      w.running[KeyOf(rank.rank())] = rank;
    }
    for (auto& m : unacked) *r.add_unacked() = m;
    for (const std::string& job_id : w.logs_of) r.add_logs_of(job_id);
    *r.mutable_labels() = {w.labels.begin(), w.labels.end()};
    r.set_cpus(w.cpus);
    r.set_memory_mb(w.memory_mb);
    for (int index : w.gpus) r.add_gpus()->set_index(index);
    int64_t ack = 0;
    absl::StatusOr<WorkerSession> session = manager_->RegisterWorker(&w.link, r, &ack);
    if (!session.ok()) return session.status();
    w.session = *session;
    w.acked = std::max(w.acked, ack);
    live_.insert(&w);
    return absl::OkStatus();
  }

  // Lets `d` pass a second at a time: every live worker heartbeats, then
  // the manager ticks.
  void Pass(absl::Duration d) {
    while (d > absl::ZeroDuration()) {
      const absl::Duration step = std::min(d, absl::Seconds(1));
      clock_.Advance(step);
      d -= step;
      for (TestWorker* w : live_) {
        v1::Heartbeat beat;
        for (const auto& [key, rank] : w->running) *beat.add_running() = rank;
        for (const auto& h : w->held) *beat.add_snapshots() = h;
        manager_->OnHeartbeat(w->session, beat);
      }
      manager_->Tick();
    }
  }
  // The worker stops heartbeating (its process is paused or gone).
  void Silence(TestWorker& w) { live_.erase(&w); }

  void Disconnect(TestWorker& w) {
    membership_->Disconnect(&w.link);
    live_.erase(&w);
  }

  static v1::RankRef Ref(const std::string& job, int attempt, int rank) {
    v1::RankRef ref;
    ref.set_job_id(job);
    ref.set_attempt(attempt);
    ref.set_rank(rank);
    return ref;
  }

  v1::WorkerMessage StartedEvent(TestWorker& w, const std::string& job, int attempt, int rank) {
    v1::WorkerMessage m;
    m.set_seq(++w.seq);
    *m.mutable_rank_started()->mutable_rank() = Ref(job, attempt, rank);
    m.mutable_rank_started()->set_pid(1000 + rank);
    return m;
  }

  v1::WorkerMessage ExitedEvent(TestWorker& w, const std::string& job, int attempt, int rank,
                                int code, int signal = 0, bool stopped = false) {
    v1::WorkerMessage m;
    m.set_seq(++w.seq);
    *m.mutable_rank_exited()->mutable_rank() = Ref(job, attempt, rank);
    m.mutable_rank_exited()->set_exit_code(code);
    m.mutable_rank_exited()->set_signal(signal);
    m.mutable_rank_exited()->set_stopped(stopped);
    return m;
  }

  static std::tuple<std::string, int, int> KeyOf(const v1::RankRef& ref) {
    return {ref.job_id(), ref.attempt(), ref.rank()};
  }

  void Deliver(TestWorker& w, const v1::WorkerMessage& m) {
    if (m.has_rank_started()) {
      v1::RunningRank& running = w.running[KeyOf(m.rank_started().rank())];
      *running.mutable_rank() = m.rank_started().rank();
      running.set_pid(m.rank_started().pid());
    }
    if (m.has_rank_exited()) w.running.erase(KeyOf(m.rank_exited().rank()));
    w.acked = std::max(w.acked, manager_->OnRankEvent(w.session, m));
  }
  void Started(TestWorker& w, const std::string& job, int attempt, int rank) {
    Deliver(w, StartedEvent(w, job, attempt, rank));
  }
  void Exited(TestWorker& w, const std::string& job, int attempt, int rank, int code,
              bool stopped = false) {
    Deliver(w, ExitedEvent(w, job, attempt, rank, code, 0, stopped));
  }
  void Killed(TestWorker& w, const std::string& job, int attempt, int rank, int signal) {
    Deliver(w, ExitedEvent(w, job, attempt, rank, 0, signal));
  }
  bool Heartbeat(TestWorker& w, std::vector<v1::RunningRank> running = {}) {
    v1::Heartbeat beat;
    for (auto& r : running) *beat.add_running() = r;
    return manager_->OnHeartbeat(w.session, beat);
  }

  std::string Submit(int ranks, int max_restarts = 0) {
    v1::JobSpec spec;
    spec.set_name("test");
    spec.set_ranks(ranks);
    spec.set_max_restarts(max_restarts);
    spec.add_command("true");
    return Submit(spec);
  }
  std::string Submit(const v1::JobSpec& spec) {
    auto id = manager_->Submit(spec);
    EXPECT_OK(id) << id.status();
    manager_->Tick();  // places it, as the coordinator's next tick would
    return id.value_or("");
  }

  v1::Job Job(const std::string& id) { return manager_->Get(id).value(); }
  // A one-rank job in the image registry.example:5000/team/train:1.2 with
  // a 60 s start timeout, on `w` registered as a worker that runs images.
  std::string SubmitInImage(TestWorker* w) {
    w->labels = {{"ringmaster.dev/images", "true"}};
    EXPECT_OK(Register(*w, "w1", 1));
    v1::JobSpec spec = CommandSpec(1);
    spec.set_image("registry.example:5000/team/train:1.2");
    spec.set_start_timeout_s(60);
    return Submit(spec);
  }
  // A heartbeat of `w` saying that rank 0 of job `id` has pulled `done` of
  // `total` bytes of the image registry.example:5000/team/train:1.2.
  void ReportPull(const TestWorker& w, const std::string& id, int64_t done, int64_t total) {
    v1::Heartbeat beat;
    v1::ImagePull* pull = beat.add_pulls();
    *pull->mutable_rank() = Ref(id, 0, 0);
    pull->set_image("registry.example:5000/team/train:1.2");
    pull->set_done_bytes(done);
    pull->set_total_bytes(total);
    ASSERT_TRUE(manager_->OnHeartbeat(w.session, beat));
  }
  // The slots the coordinator counts as used on a worker.
  int ListWorkersUsed(const std::string& worker_id) {
    for (const v1::Worker& w : manager_->ListWorkers()) {
      if (w.id() == worker_id) return w.slots_used();
    }
    return -1;
  }
  JobPage Page(const JobQuery& query) {
    absl::StatusOr<JobPage> page = manager_->ListPage(query);
    EXPECT_OK(page) << page.status();
    return page.ok() ? *std::move(page) : JobPage{};
  }
  // Every job, oldest first.
  std::vector<v1::Job> AllJobs() {
    std::vector<v1::Job> jobs;
    JobQuery query;
    for (;;) {
      JobPage page = Page(query);
      jobs.insert(jobs.begin(), page.jobs.rbegin(), page.jobs.rend());
      if (page.next_before_number == 0) return jobs;
      query.before_number = page.next_before_number;
    }
  }
  v1::StateChange Last(const std::string& id) { return *Job(id).history().rbegin(); }

  static std::vector<v1::StartRank> Starts(TestWorker& w) {
    std::vector<v1::StartRank> out;
    for (auto& m : w.link.Take()) {
      if (m.has_start_rank()) out.push_back(m.start_rank());
    }
    return out;
  }
  // The StopJob messages sent to `w`.
  static std::vector<v1::StopJob> StopsOf(TestWorker& w) {
    std::vector<v1::StopJob> out;
    for (auto& m : w.link.Take()) {
      if (m.has_stop_job()) out.push_back(m.stop_job());
    }
    return out;
  }
  static int Stops(TestWorker& w) {
    int n = 0;
    for (auto& m : w.link.Take()) n += m.has_stop_job();
    return n;
  }

  FakeClock clock_;
  RendezvousStore rendezvous_;
  MembershipOptions membership_options_;
  JobManagerOptions options_;
  std::string db_path_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<WorkerMembership> membership_;
  std::unique_ptr<JobManager> manager_;
  std::set<TestWorker*> live_;
  int processes_ = 0;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_JOBS_JOB_MANAGER_FIXTURE_H_
