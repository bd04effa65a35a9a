#include "coordinator/health/worker_health.h"

#include <cmath>
#include <csignal>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "domain/job_state.h"

namespace ringmaster {
namespace {

// Signals that ask a process to stop: its death says nothing of the machine.
bool AskedToStop(int signal) {
  return signal == SIGTERM || signal == SIGINT || signal == SIGHUP || signal == SIGQUIT;
}

// The peer a collective lost, as the trainer names it: "peer rank 2".
std::optional<int> PeerNamed(absl::string_view text) {
  constexpr absl::string_view kPeer = "peer rank ";
  for (size_t at = text.find(kPeer); at != absl::string_view::npos; at = text.find(kPeer, at + 1)) {
    absl::string_view digits = text.substr(at + kPeer.size());
    size_t n = 0;
    while (n < digits.size() && n < 9 && absl::ascii_isdigit(digits[n])) ++n;
    int peer = 0;
    if (n > 0 && absl::SimpleAtoi(digits.substr(0, n), &peer)) return peer;
  }
  return std::nullopt;
}

std::set<std::string> JobsOf(const v1::WorkerHealth& record) {
  std::set<std::string> jobs;
  for (const v1::WorkerFailure& f : record.failures()) jobs.insert(f.job_id());
  return jobs;
}

// A quarantine for failures, as opposed to a person's cordon or a GPU's.
bool Quarantine(const v1::WorkerHealth& record) {
  return record.has_cordon() && record.cordon().automatic() && record.cordon().until_unix_ms() > 0;
}

std::string Listed(const v1::WorkerHealth& record) {
  std::vector<std::string> each;
  for (const v1::WorkerFailure& f : record.failures()) {
    each.push_back(absl::StrCat(f.job_id(), ": ", f.message()));
  }
  return absl::StrJoin(each, "; ");
}

struct Xid {
  int number;
  bool critical;
  const char* meaning;
};

// From NVIDIA's "XID Errors" table of its GPU deployment and management
// documentation.
constexpr Xid kXids[] = {
    {13, false, "graphics engine exception"},
    {31, false, "GPU memory page fault"},
    {43, false, "GPU stopped processing"},
    {45, false, "preemptive cleanup, due to previous errors"},
    {48, true, "double-bit ECC error"},
    {61, false, "internal micro-controller breakpoint/warning"},
    {62, true, "internal micro-controller halt"},
    {63, true, "ECC page retirement or row remapping recording event"},
    {64, true, "ECC page retirement or row remapper recording failure"},
    {68, false, "video processor exception"},
    {74, true, "NVLink error"},
    {79, true, "GPU has fallen off the bus"},
    {92, true, "high single-bit ECC error rate"},
    {94, true, "contained ECC error"},
    {95, true, "uncontained ECC error"},
    {119, true, "GSP RPC timeout"},
    {120, true, "GSP error"},
};

const Xid* FindXid(int xid) {
  for (const Xid& x : kXids) {
    if (x.number == xid) return &x;
  }
  return nullptr;
}

}  // namespace

std::string XidMeaning(int xid) {
  const Xid* x = FindXid(xid);
  return x == nullptr ? "" : x->meaning;
}

bool CriticalXid(int xid) {
  const Xid* x = FindXid(xid);
  return x != nullptr && x->critical;
}

std::optional<Blame> BlameOf(const v1::Job& job, const FailureCause& cause, absl::Time now) {
  const int rank = cause.rank;
  if (cause.stopped || rank < 0 || rank >= job.ranks_size()) return std::nullopt;
  int blamed = -1;
  if (cause.reason == v1::RANK_START_FAILED ||
      (cause.reason == v1::RANK_SIGNALED && !AskedToStop(cause.signal))) {
    blamed = rank;
  } else if (cause.reason == v1::RANK_EXITED || cause.reason == v1::RANK_SIGNALED) {
    std::optional<int> peer = PeerNamed(cause.error);
    if (!peer) peer = PeerNamed(cause.message);
    // Collectives name a peer by its rank in the group, which a group that
    // shrank numbers anew: its process's rank is the member at that place.
    const std::vector<int> members = GroupMembers(job);
    if (peer && *peer >= 0 && *peer < static_cast<int>(members.size())) blamed = members[*peer];
  }
  if (blamed < 0 || job.ranks(blamed).worker_id().empty()) return std::nullopt;
  Blame blame;
  blame.worker_id = job.ranks(blamed).worker_id();
  v1::WorkerFailure& f = blame.failure;
  f.set_job_id(job.id());
  f.set_attempt(job.attempt());
  f.set_rank(blamed);
  f.set_reason(cause.reason);
  f.set_message(blamed == rank ? cause.message
                               : absl::StrCat("rank ", rank, " lost its peer rank ", blamed, " (",
                                              cause.message, ")"));
  f.set_time_unix_ms(absl::ToUnixMillis(now));
  return blame;
}

void HealthRecords::Load(const std::vector<v1::WorkerHealth>& records) {
  for (const v1::WorkerHealth& record : records) {
    records_[record.worker_id()] = record;
    if (record.has_cordon()) ++cordoned_;
  }
}

const v1::WorkerHealth* HealthRecords::Find(const std::string& worker_id) const {
  auto it = records_.find(worker_id);
  return it == records_.end() ? nullptr : &it->second;
}

bool HealthRecords::Cordoned(const std::string& worker_id) const {
  const v1::WorkerHealth* record = Find(worker_id);
  return record != nullptr && record->has_cordon();
}

v1::WorkerHealth& HealthRecords::At(const std::string& worker_id) {
  v1::WorkerHealth& record = records_[worker_id];
  record.set_worker_id(worker_id);
  return record;
}

void HealthRecords::SetCordon(v1::WorkerHealth& record, std::optional<v1::Cordon> cordon) {
  cordoned_ += (cordon ? 1 : 0) - (record.has_cordon() ? 1 : 0);
  if (cordon) {
    *record.mutable_cordon() = *std::move(cordon);
  } else {
    record.clear_cordon();
  }
}

v1::WorkerHealth HealthRecords::Cordon(const std::string& worker_id, const std::string& reason,
                                       const std::string& by, absl::Time now, bool drained) {
  v1::WorkerHealth& record = At(worker_id);
  v1::Cordon cordon;
  cordon.set_reason(reason);
  cordon.set_by(by);
  cordon.set_since_unix_ms(record.has_cordon() ? record.cordon().since_unix_ms()
                                               : absl::ToUnixMillis(now));
  cordon.set_drained(drained || (record.has_cordon() && record.cordon().drained()));
  SetCordon(record, std::move(cordon));
  return record;
}

v1::WorkerHealth HealthRecords::Uncordon(const std::string& worker_id) {
  v1::WorkerHealth& record = At(worker_id);
  SetCordon(record, std::nullopt);
  record.clear_failures();
  record.set_probation_until_unix_ms(0);
  return record;
}

int HealthRecords::Quarantined() const {
  int n = 0;
  for (const auto& [id, record] : records_) n += Quarantine(record) ? 1 : 0;
  return n;
}

std::vector<std::string> HealthRecords::WorkersFailing(const std::string& job_id) const {
  std::vector<std::string> workers;
  for (const auto& [id, record] : records_) {
    for (const v1::WorkerFailure& f : record.failures()) {
      if (f.job_id() == job_id) {
        workers.push_back(id);
        break;
      }
    }
  }
  return workers;
}

void HealthRecords::Withdraw(const std::string& job_id, std::vector<v1::WorkerHealth>* changed) {
  for (auto& [id, record] : records_) {
    auto* failures = record.mutable_failures();
    const int before = failures->size();
    failures->erase(
        std::remove_if(failures->begin(), failures->end(),
                       [&](const v1::WorkerFailure& f) { return f.job_id() == job_id; }),
        failures->end());
    if (failures->size() == before) continue;
    // A quarantine stands on failures of two jobs (one on probation).
    const bool on_probation = record.probation_until_unix_ms() > 0;
    if (Quarantine(record) && JobsOf(record).size() < (on_probation ? 1u : 2u)) {
      SetCordon(record, std::nullopt);
    }
    changed->push_back(record);
  }
}

HealthRecords::Verdict HealthRecords::Record(const Blame& blame, absl::Time now, int workers) {
  Verdict verdict;
  verdict.changed = Expire(now);
  v1::WorkerHealth& record = At(blame.worker_id);
  *record.add_failures() = blame.failure;
  const std::string& job_id = blame.failure.job_id();
  const std::vector<std::string> failing = WorkersFailing(job_id);
  const int everywhere = std::max(2, std::min(3, workers));
  if (static_cast<int>(failing.size()) >= everywhere) {
    verdict.job_fault = absl::StrCat(
        "it failed on ", failing.size(), " different workers (", absl::StrJoin(failing, ", "),
        ") within ", absl::FormatDuration(options_.quarantine_window),
        ": the fault is the job's, not the machines', and no worker is blamed for it");
    Withdraw(job_id, &verdict.changed);
    return verdict;
  }
  const bool on_probation = record.probation_until_unix_ms() > absl::ToUnixMillis(now);
  const std::set<std::string> jobs = JobsOf(record);
  if (record.has_cordon() || (jobs.size() < 2 && !on_probation)) {
    verdict.changed.push_back(record);
    return verdict;
  }
  const std::string why =
      on_probation
          ? absl::StrCat("failed again on probation: ", Listed(record))
          : absl::StrCat("failures of ", jobs.size(), " jobs within ",
                         absl::FormatDuration(options_.quarantine_window), ": ", Listed(record));
  const int limit = options_.max_quarantined.Of(workers);
  if (Quarantined() >= limit) {
    verdict.spared =
        absl::StrCat("worker ", blame.worker_id, " is not quarantined for ", why, ": ",
                     Quarantined(), " of ", workers, " workers already are (--max-quarantined ",
                     options_.max_quarantined.ToString(), ")");
    verdict.changed.push_back(record);
    return verdict;
  }
  v1::Cordon cordon;
  cordon.set_reason(absl::StrCat("quarantined: ", why));
  cordon.set_by("ringmaster");
  cordon.set_since_unix_ms(absl::ToUnixMillis(now));
  cordon.set_until_unix_ms(absl::ToUnixMillis(now + options_.quarantine_for));
  cordon.set_automatic(true);
  SetCordon(record, std::move(cordon));
  record.set_probation_until_unix_ms(0);
  verdict.quarantined = true;
  verdict.changed.push_back(record);
  return verdict;
}

v1::WorkerHealth HealthRecords::RecordGpuError(const std::string& worker_id, v1::GpuError error,
                                               absl::Time now, bool* cordoned) {
  *cordoned = false;
  v1::WorkerHealth& record = At(worker_id);
  std::string what;
  bool broken = false;
  switch (error.kind()) {
    case v1::GPU_ERROR_XID:
      error.set_meaning(XidMeaning(error.xid()));
      broken = CriticalXid(error.xid());
      what = absl::StrCat("XID ", error.xid(), error.meaning().empty() ? "" : " (", error.meaning(),
                          error.meaning().empty() ? "" : ")");
      break;
    case v1::GPU_ERROR_ECC_UNCORRECTABLE:
      error.set_meaning("uncorrectable ECC memory errors");
      broken = true;
      what = error.count() > 0 ? absl::StrCat(error.count(), " uncorrectable ECC errors")
                               : "a double-bit ECC error";
      break;
    default:
      error.set_meaning("pages of memory retired for ECC errors");
      what = absl::StrCat(error.count(), " retired pages");
      break;
  }
  const bool by_person = record.has_cordon() && !record.cordon().automatic();
  const bool by_gpu =
      record.has_cordon() && record.cordon().automatic() && record.cordon().until_unix_ms() == 0;
  if (broken && !by_person && !by_gpu) {
    v1::Cordon cordon;
    cordon.set_reason(absl::StrCat("GPU ", error.gpu(), error.uuid().empty() ? "" : " (",
                                   error.uuid(), error.uuid().empty() ? "" : ")", " reported ",
                                   what));
    cordon.set_by("ringmaster");
    cordon.set_since_unix_ms(absl::ToUnixMillis(now));
    cordon.set_automatic(true);
    SetCordon(record, std::move(cordon));
    error.set_cordoned(true);
    *cordoned = true;
  }
  auto* errors = record.mutable_gpu_errors();
  *errors->Add() = std::move(error);
  if (errors->size() > kGpuErrorsKept) errors->erase(errors->begin());
  return record;
}

std::vector<v1::WorkerHealth> HealthRecords::Expire(absl::Time now) {
  std::vector<v1::WorkerHealth> changed;
  const int64_t now_ms = absl::ToUnixMillis(now);
  const int64_t oldest = absl::ToUnixMillis(now - options_.quarantine_window);
  for (auto& [id, record] : records_) {
    bool change = false;
    if (Quarantine(record) && now_ms >= record.cordon().until_unix_ms()) {
      SetCordon(record, std::nullopt);
      record.clear_failures();
      record.set_probation_until_unix_ms(absl::ToUnixMillis(now + options_.quarantine_for));
      change = true;
    }
    if (record.probation_until_unix_ms() > 0 && now_ms >= record.probation_until_unix_ms()) {
      record.set_probation_until_unix_ms(0);
      change = true;
    }
    // A quarantined worker keeps the failures its reason lists.
    auto* failures = record.mutable_failures();
    while (!Quarantine(record) && !failures->empty() &&
           failures->begin()->time_unix_ms() < oldest) {
      failures->erase(failures->begin());
      change = true;
    }
    if (change) changed.push_back(record);
  }
  return changed;
}

}  // namespace ringmaster
