// JobManager: the job API, transitions and the periodic checks. Failing
// and restarting attempts are in job_manager_attempts.cc, scheduling in
// job_manager_schedule.cc, worker stream events in job_manager_workers.cc,
// worker health in job_manager_health.cc, stacks in job_manager_stacks.cc.
#include "coordinator/jobs/job_manager.h"

#include <algorithm>
#include <random>
#include <utility>

#include <google/protobuf/util/message_differencer.h>
#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/checkpoint_roots.h"
#include "common/labels.h"
#include "common/status_macros.h"
#include "coordinator/core/goodput.h"
#include "coordinator/core/rank_env.h"
#include "domain/job_state.h"
#include "domain/spec_validation.h"

namespace ringmaster {

namespace {

constexpr size_t kMaxRequestIdLength = 128;

// 1-128 of [A-Za-z0-9._:-] (a UUID fits), or empty for none.
absl::Status ValidateRequestId(const std::string& id) {
  const bool valid =
      id.size() <= kMaxRequestIdLength && std::all_of(id.begin(), id.end(), [](char c) {
        return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == ':' || c == '-';
      });
  if (valid) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("request_id must be at most ", kMaxRequestIdLength,
                   " letters, digits, '.', '_', ':' or '-' (a UUID fits), got \"",
                   absl::CHexEscape(id.substr(0, 64)), id.size() > 64 ? "...\"" : "\""));
}

// Two lists of jobs, each newest first, as one; a job in both (retired
// between the two reads) is taken from `retired`, the later read.
std::vector<v1::Job> MergeNewestFirst(std::vector<v1::Job> resident, std::vector<v1::Job> retired) {
  std::vector<v1::Job> merged;
  auto r = resident.begin();
  auto e = retired.begin();
  while (r != resident.end() || e != retired.end()) {
    const int64_t rn = r == resident.end() ? 0 : JobNumber(r->id());
    const int64_t en = e == retired.end() ? 0 : JobNumber(e->id());
    if (rn == en) ++r;
    merged.push_back(std::move(rn > en ? *r++ : *e++));
  }
  return merged;
}

}  // namespace

JobManager::JobManager(JobStore* store, RendezvousStore* rendezvous, WorkerMembership* membership,
                       const Clock* clock, JobManagerOptions options)
    : store_(store),
      rendezvous_(rendezvous),
      membership_(membership),
      clock_(clock),
      options_(std::move(options)),
      outbox_([store] { return store->Sync(); }, [store] { return store->Synced(); },
              [membership](const std::string& worker_id, const v1::CoordinatorMessage& message) {
                membership->Send(worker_id, message);
              },
              options_.on_store_lost, options_.watchers_in_background),
      table_(store, &outbox_, clock, options_.on_transition),
      run_id_(absl::StrFormat(
          "%016x", std::random_device{}() * uint64_t{0x100000000} ^ std::random_device{}())),
      // The views ask under mu_, during the JobManager's calls.
      scheduling_(options_.queues, options_.scheduling,
                  [this](const std::string& worker_id)
                      ABSL_NO_THREAD_SAFETY_ANALYSIS { return health_.Cordoned(worker_id); }),
      health_(store_, membership_, clock_, options_.health),
      attempts_({table_, outbox_, scheduling_, health_, replies_}, membership_, rendezvous_, clock_,
                options_),
      events_({table_, outbox_, health_, attempts_}, membership_, rendezvous_, clock_, options_) {}

absl::Status JobManager::Recover() {
  MutexLock lock(&mu_);
  RETURN_IF_ERROR(table_.Load());
  ASSIGN_OR_RETURN(std::vector<v1::WorkerHealth> health, store_->LoadWorkerHealth());
  health_.Load(health);
  const absl::Time now = clock_->Now();
  for (const auto& [number, record] : table_.resident()) {
    JobRecord& entry = *record;
    entry.restart_at = now;
    if (IsTerminal(entry.job.state())) continue;
    if (IsActive(entry.job.state())) {
      rendezvous_->OpenScope({entry.job.id(), entry.job.attempt()});
      entry.watch.Begin(WatchKind(entry.job.spec()), entry.job.ranks_size(), now);
      // Its survivors may still wait for the group (a journal-less store
      // forgot it).
      if (entry.job.group_generation() > 0) {
        (void)attempts_.AnnounceGroup(entry.job, entry.job.group_generation());
      }
    }
    for (const v1::RankStatus& rank : entry.job.ranks()) {
      if (rank.state() != v1::RANK_ASSIGNED) entry.watch.Started(rank.rank());
      if (rank.left_generation() > 0) entry.watch.Left(rank.rank());
      if (RankHoldsSlot(rank)) membership_->Expect(rank.worker_id(), rank.worker_address());
    }
  }
  spdlog::info("recovered {} jobs from the job store ({} ended and retired from memory)",
               table_.resident().size() + table_.retired().size(), table_.retired().size());
  return store_->Sync();
}

std::vector<std::string> JobManager::CheckpointRoots() const {
  std::vector<std::string> roots = options_.checkpoint_roots;
  const std::string& root = options_.rank_env.checkpoint_dir;
  if (!root.empty() && std::find(roots.begin(), roots.end(), root) == roots.end()) {
    roots.push_back(root);
  }
  return roots;
}

absl::Status JobManager::CheckPendingLimitsLocked(const std::string& owner,
                                                  const std::string& queue) const {
  if (owner == kAdminUser) return absl::OkStatus();
  const QueueSpec* spec = scheduling_.queues().Find(queue);
  const int in_queue_most = spec != nullptr ? spec->max_pending_jobs_per_user : 0;
  const int most = options_.max_pending_jobs_per_user;
  if (in_queue_most <= 0 && most <= 0) return absl::OkStatus();
  int in_all = 0;
  int in_queue = 0;
  for (const auto& [number, stamp] : table_.pending()) {
    const v1::Job& job = table_.resident().at(number)->job;
    if (job.owner() != owner) continue;
    ++in_all;
    if (job.spec().queue() == queue) ++in_queue;
  }
  if (in_queue_most > 0 && in_queue >= in_queue_most) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "user ", owner, " has ", in_queue, " jobs pending in queue ", queue,
        ", its max_pending_jobs_per_user (", in_queue_most, "); submit more once some start"));
  }
  if (most > 0 && in_all >= most) {
    return absl::ResourceExhaustedError(
        absl::StrCat("user ", owner, " has ", in_all,
                     " jobs pending, the coordinator's --max-pending-jobs-per-user (", most,
                     "); submit more once some start"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> JobManager::Submit(v1::JobSpec spec, const std::string& request_id,
                                               const std::string& owner) {
  RETURN_IF_ERROR(ValidateJobSpec(spec, options_.spec_limits));
  RETURN_IF_ERROR(ValidatePlacement(spec, options_.scheduling.topology_levels));
  RETURN_IF_ERROR(ValidateRequestId(request_id));
  if (!spec.checkpoint_dir().empty()) {
    RETURN_IF_ERROR(CheckCheckpointDir(spec.checkpoint_dir(), CheckpointRoots()));
  }
  ApplyJobSpecDefaults(&spec);
  // Not for a job in an image: its check runs the worker's trainer, which
  // the image lacks (ValidateJobSpec refuses one that asks).
  if (!spec.has_preflight()) spec.set_preflight(options_.preflight_default && spec.image().empty());
  // Each user's request ids are its own: a user's are stored as
  // "<user>/<id>", which no admin's id can be ('/' is not allowed in one).
  const std::string request_key =
      request_id.empty() || owner == kAdminUser ? request_id : absl::StrCat(owner, "/", request_id);
  std::string job_id;
  {
    MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(QueueAdmission admission, AdmitToQueue(scheduling_.queues(), spec, owner));
    spec.set_queue(admission.queue);
    if (!request_key.empty()) {
      ASSIGN_OR_RETURN(std::string earlier, store_->FindRequest(request_key));
      if (!earlier.empty()) {
        const JobRecord* record = table_.Find(earlier);
        ASSIGN_OR_RETURN(v1::Job job, record != nullptr ? absl::StatusOr<v1::Job>(record->job)
                                                        : store_->Load(earlier));
        if (!google::protobuf::util::MessageDifferencer::Equals(job.spec(), spec)) {
          return absl::AlreadyExistsError(
              absl::StrCat("request_id \"", request_id, "\" was used for job ", earlier,
                           " with another spec; use a new request_id for a new job"));
        }
        return earlier;
      }
    }
    RETURN_IF_ERROR(CheckPendingLimitsLocked(owner, admission.queue));
    v1::Job job;
    if (!spec.resume_from().empty()) {
      ASSIGN_OR_RETURN(*job.mutable_resume_from_dir(), ResumeFromDirLocked(spec, owner));
    }
    job.set_owner(owner);
    job.set_priority(admission.priority);
    *job.mutable_spec() = std::move(spec);
    ASSIGN_OR_RETURN(JobRecord * record, table_.Create(std::move(job), request_key));
    job_id = record->job.id();
    spdlog::info("job {}: submitted ({} ranks)", job_id, record->job.spec().ranks());
  }
  outbox_.Flush();
  return job_id;
}

absl::StatusOr<std::string> JobManager::ResumeFromDirLocked(const v1::JobSpec& spec,
                                                            const std::string& owner) {
  const std::string& from = spec.resume_from();
  auto bad = [&](absl::StatusCode code, absl::string_view why) {
    return absl::Status(code, absl::StrCat("resume_from: ", why));
  };
  if (!spec.has_trainer() && spec.checkpoint_dir().empty()) {
    return bad(absl::StatusCode::kInvalidArgument,
               "a job resumes into its checkpoint directory: set checkpoint_dir (the trainer "
               "has one)");
  }
  const JobRecord* record = table_.Find(from);
  absl::StatusOr<v1::Job> earlier = record != nullptr ? record->job
                                    : table_.FindRetired(from) != nullptr
                                        ? store_->Load(from)
                                        : absl::StatusOr<v1::Job>(absl::NotFoundError(""));
  if (!earlier.ok()) {
    return bad(absl::StatusCode::kInvalidArgument, absl::StrCat("no job \"", from, "\""));
  }
  if (owner != kAdminUser && earlier->owner() != owner) {
    return bad(absl::StatusCode::kPermissionDenied,
               absl::StrCat("job ", from, " is ", earlier->owner(), "'s, not ", owner, "'s"));
  }
  if (!IsTerminal(earlier->state())) {
    return bad(absl::StatusCode::kFailedPrecondition,
               absl::StrCat("job ", from, " is ", StateName(earlier->state()),
                            "; a job resumes from one that has ended"));
  }
  return absl::StrCat(CheckpointRoot(*earlier, options_.rank_env), "/", from);
}

absl::StatusOr<v1::Job> JobManager::Get(const std::string& job_id) {
  std::optional<v1::Job> job;
  {
    MutexLock lock(&mu_);
    if (const JobRecord* record = table_.Find(job_id)) {
      job = record->job;
      if (job->has_goodput()) *job->mutable_goodput() = GoodputAt(*job, clock_->Now());
    } else if (table_.FindRetired(job_id) == nullptr) {
      return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
    }
  }
  outbox_.Flush();
  if (job) return *job;
  return store_->Load(job_id);
}

absl::StatusOr<v1::JobProgress> JobManager::Progress(const std::string& job_id) {
  v1::JobProgress progress;
  MutexLock lock(&mu_);
  if (const JobRecord* record = table_.Find(job_id)) {
    for (const v1::ProgressPoint& point : record->series.points()) *progress.add_points() = point;
  } else if (table_.FindRetired(job_id) == nullptr) {
    return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
  }
  return progress;
}

std::vector<std::pair<std::string, v1::Goodput>> JobManager::Goodputs() {
  MutexLock lock(&mu_);
  std::vector<std::pair<std::string, v1::Goodput>> out;
  for (const auto& [number, record] : table_.resident()) {
    if (record->job.goodput().phase() == v1::Goodput::NOT_STARTED) continue;
    out.emplace_back(record->job.id(), GoodputAt(record->job, clock_->Now()));
  }
  return out;
}

std::vector<DomainGauge> JobManager::DomainGauges() {
  const std::vector<std::string>& levels = options_.scheduling.topology_levels;
  if (levels.empty()) return {};
  std::vector<DomainSlots> slots;
  {
    MutexLock lock(&mu_);
    slots = SlotsByDomain(scheduling_.Capacity(table_, health_.Schedulable()));
  }
  std::vector<DomainGauge> out;
  for (const DomainSlots& d : slots) {
    out.push_back({levels[d.level], membership_->Domain(d.domain).second, d.total, d.free});
  }
  return out;
}

std::map<v1::JobState, int> JobManager::CountByState() {
  MutexLock lock(&mu_);
  std::map<v1::JobState, int> counts;
  for (const auto& [number, record] : table_.resident()) ++counts[record->job.state()];
  for (const auto& [number, job] : table_.retired()) ++counts[job.state];
  return counts;
}

absl::StatusOr<JobPage> JobManager::ListPage(const JobQuery& query) {
  std::vector<v1::Job> resident;  // newest first
  {
    MutexLock lock(&mu_);
    const auto& records = table_.resident();
    for (auto it = records.rbegin(); it != records.rend(); ++it) {
      const v1::Job& job = it->second->job;
      if (it->first >= query.before_number) continue;
      if (!query.states.empty() && query.states.count(job.state()) == 0) continue;
      if (!absl::StartsWith(job.spec().name(), query.name_prefix)) continue;
      if (!HasLabels(job.spec().labels(), query.labels)) continue;
      resident.push_back(job);
      if (job.has_goodput()) *resident.back().mutable_goodput() = GoodputAt(job, clock_->Now());
      if (static_cast<int>(resident.size()) > query.page_size) break;
    }
  }
  outbox_.Flush();
  ASSIGN_OR_RETURN(std::vector<v1::Job> retired,
                   store_->ListRetired({false, query.before_number, query.states, query.name_prefix,
                                        query.page_size + 1, query.labels}));
  return PageOf(MergeNewestFirst(std::move(resident), std::move(retired)), query);
}

absl::StatusOr<v1::Job> JobManager::Cancel(const std::string& job_id) {
  v1::Job cancelled;
  {
    MutexLock lock(&mu_);
    if (const RetiredJob* retired = table_.FindRetired(job_id)) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job_id, " already ended: ", StateName(retired->state)));
    }
    ASSIGN_OR_RETURN(JobRecord * entry, table_.Get(job_id));
    if (IsTerminal(entry->job.state())) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job_id, " already ended: ", StateName(entry->job.state())));
    }
    RETURN_IF_ERROR(
        table_.Transition(*entry, v1::CANCELLED, v1::CANCEL_REQUESTED, "cancelled by user"));
    attempts_.StopRanks(*entry);
    cancelled = entry->job;
  }
  outbox_.Flush();
  return cancelled;
}

absl::StatusOr<int64_t> JobManager::Watch(const std::string& job_id, JobObserver observer) {
  int64_t watch_id = 0;
  {
    MutexLock lock(&mu_);
    if (const JobRecord* record = table_.Find(job_id)) {
      watch_id = table_.Watch(*record, std::move(observer));
    } else if (table_.FindRetired(job_id) == nullptr) {
      return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
    }
  }
  outbox_.Flush();  // delivers the first snapshot
  if (watch_id != 0) return watch_id;
  ASSIGN_OR_RETURN(v1::Job ended, store_->Load(job_id));
  observer(ended);
  return 0;
}

void JobManager::Unwatch(int64_t watch_id) { outbox_.Unwatch(watch_id); }

std::string JobManager::ResumeToken(const v1::Job& job) const {
  return absl::StrCat(run_id_, ".", job.revision());
}

absl::StatusOr<int64_t> JobManager::WatchAll(const std::string& resume_token,
                                             JobObserver observer) {
  int64_t watch_id = 0;
  {
    MutexLock lock(&mu_);
    std::vector<v1::Job> first;
    if (resume_token.empty()) {
      for (const auto& [number, record] : table_.resident()) first.push_back(record->job);
      std::sort(first.begin(), first.end(),
                [](const v1::Job& a, const v1::Job& b) { return a.revision() < b.revision(); });
    } else {
      const std::pair<std::string, std::string> parts = absl::StrSplit(resume_token, '.');
      int64_t revision = 0;
      if (!absl::SimpleAtoi(parts.second, &revision)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "resume_token \"", absl::CHexEscape(resume_token.substr(0, 64)),
            "\" is not one this API gave (pass an event's resume_token back as it is)"));
      }
      ASSIGN_OR_RETURN(auto changed, table_.ChangedSince(revision));
      for (const auto& [job_id, latest] : changed) {
        if (const JobRecord* record = table_.Find(job_id)) {
          first.push_back(record->job);
          continue;
        }
        absl::StatusOr<v1::Job> retired = store_->Load(job_id);
        if (absl::IsNotFound(retired.status())) continue;  // deleted since
        if (!retired.ok()) return retired.status();
        retired->set_revision(latest);
        first.push_back(*std::move(retired));
      }
    }
    watch_id = outbox_.WatchAll(std::move(first), std::move(observer));
  }
  outbox_.Flush();  // delivers the listing
  return watch_id;
}

absl::StatusOr<std::vector<RankLogSource>> JobManager::LogSources(const v1::Job& job, int attempt) {
  ASSIGN_OR_RETURN(std::vector<RankLogSource> sources, AttemptRanks(job, attempt));
  for (RankLogSource& source : sources) {
    std::string address = membership_->Address(source.worker_id);
    if (!address.empty()) source.worker_address = std::move(address);
  }
  return sources;
}

std::set<std::string> JobManager::CodeInUse() {
  std::set<std::string> in_use;
  MutexLock lock(&mu_);
  for (const auto& [number, record] : table_.resident()) {
    const std::string& code = record->job.spec().code().sha256();
    if (!code.empty() && !IsTerminal(record->job.state())) in_use.insert(code);
  }
  return in_use;
}

std::vector<v1::Worker> JobManager::ListWorkers() {
  std::vector<v1::Worker> workers;
  {
    MutexLock lock(&mu_);
    workers = health_.List(table_);
    const absl::flat_hash_set<std::string>& spares = scheduling_.spares();
    for (v1::Worker& w : workers) w.set_spare(spares.count(w.id()) > 0);
  }
  outbox_.Flush();
  return workers;
}

void JobManager::Tick() {
  {
    MutexLock lock(&mu_);
    // The tick's changes are one transaction.
    absl::Status stored = store_->Batch([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      TickLocked();
      return absl::OkStatus();
    });
    if (!stored.ok()) {
      spdlog::critical("cannot commit the job store: {}", stored.ToString());
      StoreLost(options_.on_store_lost, stored);
    }
  }
  outbox_.Flush();
  RunReplies();
}

void JobManager::TickLocked() {
  for (const LostWorker& lost : membership_->Expire()) events_.OnWorkerLost(lost);
  const absl::Time now = clock_->Now();
  // A PENDING job has no rank; only its deadline can run out.
  for (int64_t number : scheduling_.PendingWithDeadline()) {
    if (table_.pending().count(number) > 0)
      attempts_.CheckDeadline(*table_.resident().at(number), now);
  }
  const absl::flat_hash_set<std::string> relisted = membership_->ListsChangedSince(&lists_seen_);
  for (const auto& [number, record] : table_.placed()) {
    JobRecord& entry = *record;
    // Ended jobs too: their ranks hold slots.
    if (scheduling_.MaySeeNewSightings(entry, relisted)) {
      events_.CheckRanksReported(entry);
    }
    // Stacks asked for are answered by their deadline, or once the attempt
    // is over.
    if (entry.stacks_request &&
        (now >= entry.stacks_request->deadline || !IsActive(entry.job.state()) ||
         entry.stacks_request->attempt != entry.job.attempt())) {
      attempts_.FinishStacks(entry);
    }
    if (attempts_.CheckDeadline(entry, now) || !IsActive(entry.job.state())) continue;
    if (entry.ending && now >= entry.decide_at) {
      attempts_.End(entry);
      continue;
    }
    attempts_.CheckTimeouts(entry, now);
    if (AwaitsPreflight(entry.job)) attempts_.CheckPreflight(entry);
    if (entry.job.state() == v1::RUNNING) attempts_.CheckRegrowth(entry, now);
  }
  health_.Expire();
  attempts_.AdvanceRestarts(now);
  ScheduleLocked();
  table_.RetireEnded();
  if (now >= next_prune_) {
    next_prune_ = now + absl::Minutes(1);
    PruneLocked(now);
  }
}

absl::Status JobManager::Delete(const std::string& job_id) {
  {
    MutexLock lock(&mu_);
    std::optional<RetiredJob> ended;
    if (const JobRecord* entry = table_.Find(job_id)) {
      const v1::Job& job = entry->job;
      if (!IsTerminal(job.state())) {
        return absl::FailedPreconditionError(absl::StrCat(
            "job ", job_id, " is ", StateName(job.state()), "; cancel it before deleting it"));
      }
      if (std::any_of(job.ranks().begin(), job.ranks().end(), RankHoldsSlot)) {
        return absl::FailedPreconditionError(
            absl::StrCat("job ", job_id,
                         " has ended but its ranks are still stopping; delete it once "
                         "they have"));
      }
      ended = RetiredJob{0, job_id, job.state(), 0, WorkersOf(job)};
    } else if (const RetiredJob* retired = table_.FindRetired(job_id)) {
      ended = *retired;
    } else {
      return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
    }
    RETURN_IF_ERROR(DeleteLocked(*ended));
  }
  outbox_.Flush();
  return absl::OkStatus();
}

absl::Status JobManager::DeleteLocked(RetiredJob job) {
  RETURN_IF_ERROR(table_.Delete(job.id));
  v1::CoordinatorMessage forget;
  forget.mutable_delete_job_logs()->set_job_id(job.id);
  for (const std::string& worker : job.workers) outbox_.Send(worker, forget);
  spdlog::info("job {}: deleted", job.id);
  return absl::OkStatus();
}

void JobManager::PruneLocked(absl::Time now) {
  std::vector<RetiredJob> expired;  // oldest first
  const int over = static_cast<int>(table_.retired().size()) - options_.retain_finished_jobs;
  for (const auto& [number, job] : table_.retired()) {
    const bool too_many = static_cast<int>(expired.size()) < over;
    if (too_many || now - absl::FromUnixMillis(job.ended_unix_ms) >= options_.retain_finished) {
      expired.push_back(job);
    }
  }
  for (const RetiredJob& job : expired) {
    if (absl::Status s = DeleteLocked(job); !s.ok()) {
      spdlog::warn("could not prune job {}: {}", job.id, s.ToString());
      return;
    }
  }
}

}  // namespace ringmaster
