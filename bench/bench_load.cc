#include "bench/bench_load.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "coordinator/core/job_store.h"
#include "coordinator/store/sqlite_job_store.h"
#include "proto/job.grpc.pb.h"

namespace ringmaster {
namespace {

v1::StateChange Change(v1::JobState state, v1::Reason reason, const std::string& message,
                       int64_t time_ms) {
  v1::StateChange change;
  change.set_state(state);
  change.set_reason(reason);
  change.set_message(message);
  change.set_time_unix_ms(time_ms);
  return change;
}

// An ended four-rank trainer job numbered `number`.
v1::Job EndedTrainerJob(int64_t number, int64_t ended_ms) {
  v1::Job job;
  job.set_id(absl::StrCat("train-mnist-", number));
  v1::JobSpec* spec = job.mutable_spec();
  spec->set_name("train-mnist");
  spec->set_ranks(4);
  spec->set_max_restarts(3);
  spec->set_working_dir("/srv/ringmaster/projects/mnist");
  (*spec->mutable_env())["OMP_NUM_THREADS"] = "4";
  (*spec->mutable_env())["RINGMASTER_RUN"] = absl::StrCat("sweep-", number % 97);
  v1::TrainerSpec* trainer = spec->mutable_trainer();
  trainer->mutable_model()->set_type("mlp");
  for (int width : {512, 256, 128}) trainer->mutable_model()->add_hidden(width);
  trainer->mutable_data()->set_path("/srv/ringmaster/data/mnist.csv");
  trainer->mutable_data()->set_format("csv");
  trainer->mutable_optimizer()->set_type("adamw");
  trainer->mutable_optimizer()->set_lr(0.001);
  trainer->set_epochs(10);
  trainer->set_batch_size(64);
  trainer->set_precision("fp32");
  job.set_state(v1::SUCCEEDED);
  job.set_world_size(4);
  for (int r = 0; r < 4; ++r) {
    v1::RankStatus* rank = job.add_ranks();
    rank->set_rank(r);
    rank->set_worker_id(absl::StrCat("sim-", (number + r / 2) % 2000));
    rank->set_worker_address("10.0.3.17:7072");
    rank->set_slot(r % 2);
    rank->set_state(v1::RANK_SUCCEEDED);
    rank->set_pid(100000 + r);
    rank->set_worker_incarnation("c0ffee-1700000000");
  }
  job.set_master_addr("10.0.3.17");
  job.set_master_port(29500);
  v1::Progress* progress = job.mutable_progress();
  progress->set_step(9380);
  progress->set_total_steps(9380);
  progress->set_epoch(10);
  progress->set_loss(0.0412);
  progress->set_samples_per_second(41000);
  progress->set_eval_accuracy(0.981);
  progress->set_world_size(4);
  progress->set_backend("gloo");
  const int64_t start = ended_ms - 600000;
  job.set_create_unix_ms(start);
  *job.add_history() = Change(v1::PENDING, v1::SUBMITTED, "submitted", start);
  *job.add_history() =
      Change(v1::STARTING, v1::SCHEDULED, "4 ranks on 2 workers; rank 0 on sim-17", start + 20);
  *job.add_history() = Change(v1::RUNNING, v1::RANKS_RUNNING, "all 4 ranks running", start + 900);
  *job.add_history() =
      Change(v1::SUCCEEDED, v1::RANKS_SUCCEEDED, "all 4 ranks exited with code 0", ended_ms);
  return job;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1, static_cast<size_t>(p * values.size()));
  return values[index];
}

}  // namespace

absl::StatusOr<HistoryStats> WriteHistory(const std::string& db_path, int jobs) {
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(std::unique_ptr<JobStore> store, SqliteJobStore::Open(db_path));
  const int64_t now_ms = absl::ToUnixMillis(start);
  double bytes = 0;
  RETURN_IF_ERROR(store->Batch([&]() -> absl::Status {
    for (int i = 0; i < jobs; ++i) {
      ASSIGN_OR_RETURN(int64_t number, store->NextJobNumber());
      const int64_t ended_ms = now_ms - (jobs - i) * 3000;  // one every 3 s
      const v1::Job job = EndedTrainerJob(number, ended_ms);
      bytes += job.ByteSizeLong();
      RETURN_IF_ERROR(store->Create(job));
      RETURN_IF_ERROR(store->Retire({number,
                                     job.id(),
                                     job.state(),
                                     ended_ms,
                                     {job.ranks(0).worker_id(), job.ranks(3).worker_id()}}));
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(store->Sync());
  return HistoryStats{jobs > 0 ? bytes / jobs : 0, absl::ToDoubleSeconds(absl::Now() - start)};
}

std::vector<std::string> LoadResult::Lines() const {
  return {absl::StrCat("result submits ", submit_ms.size()),
          absl::StrCat("result submit_errors ", submit_errors),
          absl::StrCat("result submit_p50_ms ", Percentile(submit_ms, 0.50)),
          absl::StrCat("result submit_p99_ms ", Percentile(submit_ms, 0.99)),
          absl::StrCat("result lists ", list_ms.size()),
          absl::StrCat("result list_p50_ms ", Percentile(list_ms, 0.50)),
          absl::StrCat("result list_p99_ms ", Percentile(list_ms, 0.99))};
}

LoadResult RunSubmitsAndLists(const std::string& target, double rate, absl::Duration duration) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto stub = v1::JobService::NewStub(channel);
  LoadResult result;
  Mutex mu;
  std::atomic<int> in_flight{0};
  std::atomic<bool> stop{false};
  std::thread lister([&] {
    while (!stop) {
      grpc::ClientContext context;
      v1::ListJobsRequest request;
      request.set_page_size(50);
      v1::ListJobsResponse response;
      const absl::Time sent = absl::Now();
      const grpc::Status status = stub->ListJobs(&context, request, &response);
      const double ms = absl::ToDoubleMilliseconds(absl::Now() - sent);
      if (status.ok() && response.jobs_size() == 50) {
        MutexLock lock(&mu);
        result.list_ms.push_back(ms);
      }
      absl::SleepFor(absl::Seconds(1));
    }
  });
  struct Call {
    grpc::ClientContext context;
    v1::SubmitJobRequest request;
    v1::SubmitJobResponse response;
    absl::Time sent;
  };
  const absl::Time start = absl::Now();
  const int total = static_cast<int>(rate * absl::ToDoubleSeconds(duration));
  for (int i = 0; i < total; ++i) {
    const absl::Duration wait = start + absl::Seconds(i / rate) - absl::Now();
    if (wait > absl::ZeroDuration()) absl::SleepFor(wait);
    auto* call = new Call;
    v1::JobSpec* spec = call->request.mutable_spec();
    spec->set_name("scale");
    spec->set_ranks(2);
    spec->set_working_dir("/");
    spec->add_command("true");
    call->sent = absl::Now();
    in_flight.fetch_add(1);
    stub->async()->SubmitJob(
        &call->context, &call->request, &call->response, [&, call](grpc::Status status) {
          const double ms = absl::ToDoubleMilliseconds(absl::Now() - call->sent);
          {
            MutexLock lock(&mu);
            if (status.ok()) {
              result.submit_ms.push_back(ms);
            } else {
              ++result.submit_errors;
            }
          }
          delete call;
          in_flight.fetch_sub(1);
        });
  }
  while (in_flight.load() > 0) absl::SleepFor(absl::Milliseconds(10));
  stop = true;
  lister.join();
  MutexLock lock(&mu);
  return result;
}

}  // namespace ringmaster
