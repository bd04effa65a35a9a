#include "coordinator/scheduling/queue_scheduler.h"

#include <algorithm>
#include <queue>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/string_view_hash.h"
#include "coordinator/scheduling/victim_search.h"

namespace ringmaster {

int PreemptionsInTheLastHour(const std::vector<absl::Time>& preempted_at, absl::Time now) {
  return static_cast<int>(std::count_if(preempted_at.begin(), preempted_at.end(),
                                        [now](absl::Time t) { return now - t < absl::Hours(1); }));
}

SlotAmount AmountOf(const GangRequest& request, int ranks) {
  return {int64_t{ranks} * std::max(1, request.gpus_per_rank),
          int64_t{ranks} * request.gpus_per_rank};
}

namespace {

// A pending job as a pass orders it: what the order, and the decision on a
// job that waits for slots, read, beside the job (read only to place it).
struct InLine {
  bool preemptor = false;
  int priority = 0;
  bool recovering = false;  // it lost a worker: it goes first, as a preemptor does
  // Users take turns in a queue: the jobs its owner runs there, plus those
  // of its own ahead of this one.
  int turn = 0;
  int64_t sequence = 0;
  SlotAmount need;  // of its fewest ranks
  bool gpu = false;
  absl::Time pending_since;
  std::string_view never_fits;  // NeverFits of its request: why it never fits
  const PendingJob* job = nullptr;

  bool first() const { return preemptor || recovering; }
  bool operator<(const InLine& o) const {
    if (first() != o.first()) return first();
    if (priority != o.priority) return priority > o.priority;
    if (turn != o.turn) return turn < o.turn;
    return sequence < o.sequence;
  }
};

// Sorts `lines`, in order but for their turns, into order: within each run
// of equal (first, priority), a stable counting sort by turn (linear: a
// queue holds thousands of jobs, sorted again at every pass).
void SortByTurn(std::vector<InLine>& lines) {
  std::vector<InLine> sorted;
  std::vector<size_t> starts;  // where each turn's lines go, then the next free place
  for (size_t begin = 0, end; begin < lines.size(); begin = end) {
    const InLine& head = lines[begin];
    int least = head.turn, most = head.turn;
    for (end = begin; end < lines.size() && lines[end].first() == head.first() &&
                      lines[end].priority == head.priority;
         ++end) {
      least = std::min(least, lines[end].turn);
      most = std::max(most, lines[end].turn);
    }
    const auto first = lines.begin() + static_cast<std::ptrdiff_t>(begin);
    const auto last = lines.begin() + static_cast<std::ptrdiff_t>(end);
    if (least == most) continue;
    // Turns far apart (a user running thousands of jobs): a sort by
    // comparison costs less than counting.
    if (static_cast<size_t>(most - least) > 4 * (end - begin)) {
      std::stable_sort(first, last);
      continue;
    }
    starts.assign(static_cast<size_t>(most - least) + 2, 0);
    for (size_t i = begin; i < end; ++i) ++starts[lines[i].turn - least + 1];
    for (size_t t = 1; t < starts.size(); ++t) starts[t] += starts[t - 1];
    sorted.resize(end - begin);
    for (size_t i = begin; i < end; ++i) sorted[starts[lines[i].turn - least]++] = lines[i];
    std::copy(sorted.begin(), sorted.end(), first);
  }
}

struct QueueState {
  const QueueSpec* spec = nullptr;
  SlotAmount in_use;
  std::map<std::string_view, int> running_by_user;
  void Runs(std::string_view owner) { ++running_by_user[owner]; }
  std::vector<InLine> pending;  // in the order they are considered
  size_t next = 0;              // the first not yet decided
  int running_jobs = 0;
  int placed = 0;               // of its pending jobs, this pass
  bool reserved_share = false;  // this pass reserved for it as owed its share
  // What its preemptible running jobs hold, by priority.
  std::map<int, SlotAmount> preemptible;
  bool over_quota() const { return !in_use.Within(spec->quota); }
  // What its preemptible jobs of priority below `priority` hold.
  SlotAmount PreemptibleBelow(int priority) const {
    SlotAmount sum;
    for (auto it = preemptible.begin(); it != preemptible.end() && it->first < priority; ++it) {
      sum = sum + it->second;
    }
    return sum;
  }
};

// One scheduling pass over a snapshot: see the header for the policy.
class Pass {
 public:
  Pass(const QueueConfig& config, const std::vector<const RunningJob*>& running,
       std::vector<WorkerCapacity> free, absl::Time now, const SchedulingPolicy& policy,
       NeverFitsCache* never_fits)
      : running_(running),
        free_(std::move(free)),
        now_(now),
        policy_(policy),
        never_fits_(never_fits != nullptr ? never_fits : &own_never_fits_) {
    never_fits_->Refresh(free_);
    for (const QueueSpec& spec : config.queues) {
      QueueState& q = queues_[spec.name];
      q.spec = &spec;
      by_name_.emplace(spec.name, &q);
    }
    default_queue_ = by_name_.at(config.default_queue);
    for (size_t i = 0; i < free_.size(); ++i) {
      const WorkerCapacity& w = free_[i];
      total_.slots += w.total_slots;
      if (w.gpu_slots) total_.gpus += w.total_slots;
      FreeCount& count = w.spare ? spare_free_count_ : free_count_;
      count.slots += static_cast<int64_t>(w.free_slots.size());
      if (w.gpu_slots) count.gpu_slots += static_cast<int64_t>(w.free_slots.size());
    }
    for (const RunningJob* running_job : running_) {
      const RunningJob& job = *running_job;
      QueueState& q = QueueOf(job.queue);
      const SlotAmount held = AmountOf(job.request, static_cast<int>(job.ranks.size()));
      q.in_use = q.in_use + held;
      if (job.preemptible) q.preemptible[job.priority] = q.preemptible[job.priority] + held;
      q.Runs(job.owner);
      ++q.running_jobs;
    }
  }

  SchedulingDecisions Run(const std::vector<PendingJob>& pending) {
    pending_ = pending.data();
    decisions_.jobs.resize(pending.size());
    for (const PendingJob& job : pending) {
      QueueOf(job.queue).pending.push_back(
          {job.preemptor, job.priority, job.request.recovering, 0, job.sequence,
           AmountOf(job.request, FewestRanks(job.request)), job.request.gpus_per_rank > 0,
           job.pending_since, NeverFitsCached(job.request), &job});
    }
    for (auto& [name, q] : queues_) {
      // Each user's jobs in order; then the users' jobs interleaved, so
      // that one user's backlog does not hold up another's first job.
      // They come in submit order: often already in order.
      if (!std::is_sorted(q.pending.begin(), q.pending.end())) {
        std::sort(q.pending.begin(), q.pending.end());
      }
      // A job that has waited reserve_after keeps its place by age, so that
      // it reserves before other users' newer jobs take its slots.
      StringViewMap<int> turns(q.running_by_user.begin(), q.running_by_user.end());
      for (InLine& line : q.pending) {
        const bool reserving = now_ - line.pending_since >= policy_.reserve_after;
        line.turn = reserving ? 0 : turns[line.job->owner]++;
      }
      SortByTurn(q.pending);
      if (!q.pending.empty() || q.running_jobs > 0) {
        wanting_weights_ += q.spec->weight;
        ++wanting_;
      }
      if (!q.pending.empty()) order_.push(TurnOf(q));
    }
    while (!order_.empty()) {
      QueueState& q = *order_.top().queue;
      order_.pop();
      // While its next job is still ahead of every other queue's, the queue
      // goes on without passing through the order.
      for (;;) {
        Decide(q.pending[q.next++], q);
        if (q.next >= q.pending.size()) break;
        const Turn next = TurnOf(q);
        if (!order_.empty() && order_.top() < next) {
          order_.push(next);
          break;
        }
      }
    }
    for (auto& [name, q] : queues_) {
      QueueLoad& load = decisions_.queues[name];
      load.in_use = q.in_use;
      load.running_jobs = q.running_jobs;
      load.pending_jobs = static_cast<int>(q.pending.size()) - q.placed;
    }
    return std::move(decisions_);
  }

 private:
  QueueState& QueueOf(std::string_view name) {
    auto it = by_name_.find(name);
    return it != by_name_.end() ? *it->second : *default_queue_;
  }

  // The queue's dominant share of the cluster over its weight, with `more`
  // added to what it uses.
  double Share(const QueueState& q, const SlotAmount& more = {}) const {
    const SlotAmount used = q.in_use + more;
    double share = 0;
    if (total_.slots > 0) share = static_cast<double>(used.slots) / total_.slots;
    if (total_.gpus > 0) share = std::max(share, static_cast<double>(used.gpus) / total_.gpus);
    return share / q.spec->weight;
  }

  // Whether `q` is below its weighted share of the cluster among the
  // queues that want capacity (those with jobs pending or running), with
  // another such queue: the idle slots it is owed are kept for it rather
  // than given to queues above their share.
  bool Owed(const QueueState& q) const { return wanting_ > 1 && Share(q) * wanting_weights_ < 1.0; }

  // Where a queue's next job stands in the order of the pass: preemptors
  // and jobs that lost a worker, then the highest priority; among equals the queue with the least
  // weighted share, then the oldest job.
  struct Turn {
    bool first;      // a preemptor, or a job that lost a worker
    bool borrowing;  // its queue would exceed its quota with the job
    int priority;
    double share;
    int64_t sequence;
    QueueState* queue;
    bool operator>(const Turn& o) const { return o < *this; }
    bool operator<(const Turn& o) const {
      if (first != o.first) return first;
      if (borrowing != o.borrowing) return !borrowing;
      if (priority != o.priority) return priority > o.priority;
      if (share != o.share) return share < o.share;
      return sequence < o.sequence;
    }
  };

  // Where the queue's next job stands in the order.
  Turn TurnOf(QueueState& q) {
    const InLine& head = q.pending[q.next];
    // Half-way between the share it has and the one it would have with its
    // head started: the share before favours a queue of jobs large for its
    // share (each start overshoots it), the share after (Kueue's rule)
    // starves it.
    const double share = (Share(q) + Share(q, head.need)) / 2;
    return {head.first(),  !(q.in_use + head.need).Within(q.spec->quota),
            head.priority, share,
            head.sequence, &q};
  }

  JobDecision& DecisionOf(const PendingJob& job) { return decisions_.jobs[&job - pending_]; }

  // Thousands of jobs wait for slots: deciding one that does reads only
  // `line`, not the job.
  void Decide(const InLine& line, QueueState& q) {
    const PendingJob& job = *line.job;
    const SlotAmount& need = line.need;
    const bool borrowing = !(q.in_use + need).Within(q.spec->quota);
    if (borrowing && !line.preemptor && within_quota_waiting_[line.gpu]) {
      if (borrow_wait_.empty()) {
        borrow_wait_ = Keep(
            "would borrow, while a job within its queue's quota waits for slots; what is "
            "lent is only what no such job waits for");
      }
      WaitFor(line, borrow_wait_);
      return;
    }
    if (!(q.in_use + need).Within(q.spec->limit)) {
      // Its own queue's lower-priority jobs may make room under the limit.
      const bool room_below =
          (q.in_use - q.PreemptibleBelow(line.priority) + need).Within(q.spec->limit);
      if (room_below && !line.preemptor && MaySeekVictims(line.priority, q, need) &&
          Preempt(job, q, need)) {
        return;
      }
      Wait(job, AtLimit(q, need));
      return;
    }
    const int most = q.spec->max_running_jobs_per_user;
    if (most > 0 && q.running_by_user[job.owner] >= most) {
      Wait(job, absl::StrCat(std::string(job.owner), " runs ", q.running_by_user[job.owner],
                             " jobs in queue ", q.spec->name, ", its max_running_jobs_per_user"));
      return;
    }
    // Fewer free slots than it needs: no need to look at each worker.
    const int64_t free = FreeSlots(job.request);
    const bool short_of_slots = need.slots > free;
    std::string shortfall;
    if (!short_of_slots) {
      absl::StatusOr<std::vector<RankPlacement>> placement = PlaceGang(free_, job.request);
      if (placement.ok()) {
        Start(job, q, *std::move(placement));
        return;
      }
      shortfall = std::string(placement.status().message());
    }
    if (!line.never_fits.empty()) {
      DecisionOf(job).waiting = line.never_fits;  // it holds up no one
      return;
    }
    // No job borrows what it waits for (the preemptor too, if it becomes one).
    within_quota_waiting_[line.gpu] |= !borrowing;
    if (!line.preemptor && (job.request.recovering || MaySeekVictims(line.priority, q, need)) &&
        Preempt(job, q, need)) {
      return;
    }
    const bool owed = !q.reserved_share && Owed(q);
    if (line.first() || now_ - line.pending_since >= policy_.reserve_after || owed) {
      q.reserved_share |= owed;  // for its next job only
      Wait(job, Reserve(job, free_));
      return;
    }
    int higher = 0;
    for (auto it = ahead_by_priority_.upper_bound(line.priority); it != ahead_by_priority_.end();
         ++it) {
      higher += it->second;
    }
    if (!short_of_slots) {
      Wait(job, Ahead(higher, shortfall));
      return;
    }
    // Thousands of jobs wait for the same few reasons: each is made once.
    auto [it, added] = short_reasons_.try_emplace({need.slots, line.gpu, free, higher});
    if (added) {
      it->second = Keep(
          Ahead(higher, SlotShortfall(job.request, FewestRanks(job.request), free, free_.size())));
    }
    WaitFor(line, it->second);
  }

  // A reason kept in the decisions, for waiting jobs to view.
  std::string_view Keep(std::string reason) {
    return decisions_.reasons.emplace_back(std::move(reason));
  }

  static std::string Ahead(int higher, absl::string_view why) {
    if (higher == 0) return std::string(why);
    return absl::StrCat(higher, higher == 1 ? " job" : " jobs", " of higher priority ahead; ", why);
  }

  static std::string AtLimit(const QueueState& q, const SlotAmount& need) {
    const bool gpus = q.in_use.gpus + need.gpus > q.spec->limit.gpus;
    const int64_t used = gpus ? q.in_use.gpus : q.in_use.slots;
    const int64_t limit = gpus ? q.spec->limit.gpus : q.spec->limit.slots;
    const char* unit = gpus ? " GPUs" : " slots";
    std::string text =
        absl::StrCat("queue ", q.spec->name, " at its limit (", used, " of ", limit, unit, ")");
    if (used + (gpus ? need.gpus : need.slots) > limit && used < limit) {
      absl::StrAppend(&text, "; needs ", gpus ? need.gpus : need.slots, unit);
    }
    return text;
  }

  // NeverFits, from the cache; an answer other than "" is kept in the
  // decisions, which outlive the cache a caller does not keep.
  std::string_view NeverFitsCached(const GangRequest& r) {
    const std::string_view why = never_fits_->Get(free_, r);
    if (why.empty()) return why;
    auto it = kept_never_fits_.find(why);
    if (it == kept_never_fits_.end()) it = kept_never_fits_.insert(Keep(std::string(why))).first;
    return *it;
  }

  // TakeCapacity on free_, keeping the counts of free slots.
  void Take(const std::vector<RankPlacement>& placement, const GangRequest& request) {
    std::map<size_t, size_t> before;
    for (const RankPlacement& p : placement) {
      auto it = WorkerIndex().find(p.worker_id);
      if (it != WorkerIndex().end())
        before.emplace(it->second, free_[it->second].free_slots.size());
    }
    TakeCapacity(free_, placement, request);
    for (const auto& [index, size] : before) {
      const int64_t taken = static_cast<int64_t>(size - free_[index].free_slots.size());
      FreeCount& count = free_[index].spare ? spare_free_count_ : free_count_;
      count.slots -= taken;
      if (free_[index].gpu_slots) count.gpu_slots -= taken;
    }
  }

  void Start(const PendingJob& job, QueueState& q, std::vector<RankPlacement> placement) {
    Take(placement, job.request);
    q.in_use = q.in_use + AmountOf(job.request, static_cast<int>(placement.size()));
    q.Runs(job.owner);
    ++q.running_jobs;
    ++q.placed;
    ++ahead_by_priority_[job.priority];
    DecisionOf(job).placement = std::move(placement);
  }

  void Wait(const PendingJob& job, std::string why) { WaitFor(job, Keep(std::move(why))); }
  void WaitFor(const PendingJob& job, std::string_view why) {
    ++ahead_by_priority_[job.priority];
    DecisionOf(job).waiting = why;
  }
  void WaitFor(const InLine& line, std::string_view why) {
    ++ahead_by_priority_[line.priority];
    DecisionOf(*line.job).waiting = why;
  }

  // Takes out of free_ the slots `job` would use of `capacity` (free_, or
  // free_ with victims' slots): as many of its ranks as fit. "waiting for 4
  // slots; 2 reserved for it".
  std::string Reserve(const PendingJob& job, const std::vector<WorkerCapacity>& capacity) {
    GangRequest partial = job.request;
    partial.ranks = FewestRanks(job.request);
    partial.min_ranks = 1;
    int reserved = 0;
    const bool none_free = &capacity == &free_ && FreeSlots(job.request) == 0;
    absl::StatusOr<std::vector<RankPlacement>> some =
        none_free ? absl::ResourceExhaustedError("") : PlaceGang(capacity, partial);
    if (some.ok()) {
      for (const RankPlacement& p : *some) {
        auto w = WorkerIndex().find(p.worker_id);
        if (w == WorkerIndex().end()) continue;
        const std::vector<int>& free_slots = free_[w->second].free_slots;
        for (int slot : p.slots) {
          reserved += std::binary_search(free_slots.begin(), free_slots.end(), slot) ? 1 : 0;
        }
      }
      Take(*some, job.request);
    }
    const int needed = partial.ranks * std::max(1, job.request.gpus_per_rank);
    const char* unit = job.request.gpus_per_rank > 0 ? " GPU slots" : " slots";
    return absl::StrCat("waiting for ", needed - reserved, unit, "; ", reserved,
                        " reserved for it");
  }

  // Whether `r` may be a victim of `job` from queue `q`: preemptible, not
  // already one, and either in a queue over its quota (lent capacity) or
  // of lower priority in the job's own queue.
  bool MayPreempt(const RunningJob& r, const PendingJob& job, const QueueState& q) {
    if (!r.preemptible || victims_.count(r.job_id) > 0) return false;
    // What runs on a spare gives way to a job that lost a worker, whatever
    // its priority: that is what it runs there on.
    if (job.request.recovering && r.request.spare_ok && OnSpare(r)) return true;
    const int most = policy_.max_preemptions_per_hour;
    if (most > 0 && PreemptionsInTheLastHour(r.preempted_at, now_) >= most) return false;
    const QueueState& theirs = QueueOf(r.queue);
    if (&theirs == &q) return r.priority < job.priority;
    return theirs.over_quota();
  }

  bool OnSpare(const RunningJob& r) const {
    return std::any_of(r.ranks.begin(), r.ranks.end(), [&](const RankPlacement& p) {
      auto it = WorkerIndex().find(p.worker_id);
      return it != WorkerIndex().end() && free_[it->second].spare;
    });
  }

  // Whether `job`'s queue quota entitles it to run once the lower-priority
  // jobs of its own queue are stopped, and preemption could free enough:
  // cheap bounds, before any victim is looked for.
  bool MaySeekVictims(int priority, const QueueState& q, const SlotAmount& need) {
    const SlotAmount own = q.PreemptibleBelow(priority);
    if (!(q.in_use - own + need).Within(q.spec->quota)) return false;
    auto failed = failed_need_.find({q.spec->name, priority});
    if (failed != failed_need_.end() && failed->second.Within(need)) return false;
    SlotAmount releasable = own;
    for (const auto& [name, other] : queues_) {
      if (&other == &q || !other.over_quota()) continue;
      for (const auto& [priority, held] : other.preemptible) releasable = releasable + held;
    }
    return need.slots <= releasable.slots + free_count_.slots;
  }

  // Chooses victims that free enough for `job`; false when none do.
  bool Preempt(const PendingJob& job, QueueState& q, const SlotAmount& need) {
    if (!TryPreempt(job, q, need)) {
      SlotAmount& failed = failed_need_[{q.spec->name, job.priority}];
      if (failed.slots == 0 || need.Within(failed)) failed = need;
      return false;
    }
    return true;
  }

  // Who may be a victim of `job`: jobs of queues over their quota first,
  // then by lowest priority, then the newest.
  std::vector<const RunningJob*> Candidates(const PendingJob& job, const QueueState& q) {
    std::vector<const RunningJob*> candidates;
    absl::flat_hash_set<const RunningJob*> on_spares;  // give way first to a job that lost a worker
    for (const RunningJob* r : running_) {
      if (!MayPreempt(*r, job, q)) continue;
      candidates.push_back(r);
      if (job.request.recovering && r->request.spare_ok && OnSpare(*r)) on_spares.insert(r);
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [&](const RunningJob* a, const RunningJob* b) {
                       const bool a_spare = on_spares.count(a) > 0;
                       if (a_spare != (on_spares.count(b) > 0)) return a_spare;
                       const bool a_lent = &QueueOf(a->queue) != &q;
                       const bool b_lent = &QueueOf(b->queue) != &q;
                       if (a_lent != b_lent) return a_lent;
                       if (a->priority != b->priority) return a->priority < b->priority;
                       return a->started > b->started;
                     });
    return candidates;
  }

  // Releases candidates until the job fits: elastic jobs shrink first; the
  // young only when the rest is not enough; elastic jobs are stopped whole
  // last. A queue that lent stops giving back once it is within its quota.
  bool ChooseVictims(VictimSearch& v, const PendingJob& job, const QueueState& q) {
    for (int round = 0; round < 3; ++round) {
      for (size_t i = 0; i < v.candidates.size(); ++i) {
        const RunningJob& r = *v.candidates[i];
        const QueueState& theirs = QueueOf(r.queue);
        const bool lent =
            &theirs == &q || !(theirs.in_use - v.lent_back[r.queue]).Within(theirs.spec->quota);
        // The young of the job's own queue only as a last resort; another
        // queue's never: what it borrowed stays its until min_runtime.
        const bool young = now_ - r.started < policy_.min_runtime;
        const bool on_spare = job.request.recovering && r.request.spare_ok && OnSpare(r);
        if (!on_spare && ((young && (round == 0 || &theirs != &q)) || !lent)) continue;
        const int world = static_cast<int>(r.ranks.size());
        const int fewest = std::min(world, FewestRanks(r.request));
        if (ReleaseRanks(v, i, round < 2 && fewest < world ? fewest : 0, job.request)) return true;
      }
    }
    return false;
  }

  bool TryPreempt(const PendingJob& job, QueueState& q, const SlotAmount& need) {
    VictimSearch v;
    v.candidates = Candidates(job, q);
    if (v.candidates.empty()) return false;
    v.released.assign(v.candidates.size(), 0);
    v.capacity = free_;
    if (!ChooseVictims(v, job, q)) return false;
    SpareUnneeded(v, job.request);
    // The quota must hold with the job started and its own queue's victims
    // stopped.
    SlotAmount own_released;
    bool only_spares = job.request.recovering;  // a spare given back is not borrowed
    for (size_t i = 0; i < v.candidates.size(); ++i) {
      const RunningJob& r = *v.candidates[i];
      if (&QueueOf(r.queue) == &q) own_released = own_released + AmountOf(r.request, v.released[i]);
      if (v.released[i] > 0) only_spares &= r.request.spare_ok && OnSpare(r);
    }
    if (!only_spares && !(q.in_use - own_released + need).Within(q.spec->quota)) return false;
    std::vector<std::string> names;
    for (size_t i = 0; i < v.candidates.size(); ++i) {
      if (v.released[i] == 0) continue;
      const RunningJob& r = *v.candidates[i];
      const int world = static_cast<int>(r.ranks.size());
      victims_.insert(r.job_id);
      decisions_.preemptions.push_back({std::string(r.job_id), std::string(job.job_id),
                                        v.released[i] < world ? world - v.released[i] : 0});
      names.emplace_back(r.job_id);
    }
    // What it will hold counts against its queue from now, so that the
    // jobs behind it do not preempt for the same share.
    q.in_use = q.in_use + need;
    std::string reserve = Reserve(job, v.capacity);
    Wait(job, absl::StrCat("preempting ", absl::StrJoin(names, ", "), "; ", reserve));
    return true;
  }

  const std::vector<const RunningJob*>& running_;
  const PendingJob* pending_ = nullptr;  // the pending jobs given, in order
  std::vector<WorkerCapacity> free_;     // less what is placed or reserved this pass
  const absl::Time now_;
  const SchedulingPolicy& policy_;
  SlotAmount total_;
  // Free slots in free_, and of them GPU slots: of the workers that are not
  // spares, and of the spares.
  struct FreeCount {
    int64_t slots = 0;
    int64_t gpu_slots = 0;
  };
  FreeCount free_count_;
  FreeCount spare_free_count_;
  // The free slots of the kind `r` asks, on the workers it may use.
  int64_t FreeSlots(const GangRequest& r) const {
    const bool gpu = r.gpus_per_rank > 0;
    int64_t free = gpu ? free_count_.gpu_slots : free_count_.slots;
    if (UsesSpares(r)) free += gpu ? spare_free_count_.gpu_slots : spare_free_count_.slots;
    return free;
  }
  // free_'s index by worker id, made when first asked for: most passes
  // start nothing on a full cluster.
  const StringViewMap<size_t>& WorkerIndex() const {
    if (worker_index_.empty() && !free_.empty()) {
      worker_index_.reserve(free_.size());
      for (size_t i = 0; i < free_.size(); ++i) worker_index_.emplace(free_[i].worker_id, i);
    }
    return worker_index_;
  }
  mutable StringViewMap<size_t> worker_index_;
  NeverFitsCache own_never_fits_;  // when the caller keeps none
  NeverFitsCache* never_fits_;
  StringViewSet kept_never_fits_;  // the cache's answers as kept in the decisions
  std::map<std::string, QueueState, std::less<>> queues_;
  StringViewMap<QueueState*> by_name_;  // into queues_
  QueueState* default_queue_ = nullptr;
  // Each queue with jobs left, the one whose turn it is on top.
  std::priority_queue<Turn, std::vector<Turn>, std::greater<Turn>> order_;
  // Reasons of jobs short of free slots, by need, GPU, free slots and jobs
  // of higher priority ahead.
  absl::flat_hash_map<std::tuple<int64_t, bool, int64_t, int>, std::string_view> short_reasons_;
  // The queues with jobs pending or running, and their weights.
  int wanting_ = 0;
  double wanting_weights_ = 0;
  std::set<std::string_view> victims_;
  // The smallest need for which preemption failed, by queue and priority:
  // larger needs there fail too, and are not tried again this pass.
  std::map<std::pair<std::string, int>, SlotAmount> failed_need_;
  // A job within its queue's quota waits for slots, of CPU workers [0] or
  // GPU workers [1]: later jobs that would borrow the same kind wait too,
  // for the reason kept in borrow_wait_.
  bool within_quota_waiting_[2] = {false, false};
  std::string_view borrow_wait_;
  // Jobs decided so far that started, or wait for slots, by priority.
  std::map<int, int> ahead_by_priority_;
  SchedulingDecisions decisions_;
};

}  // namespace

SchedulingDecisions ScheduleQueues(const QueueConfig& config,
                                   const std::vector<PendingJob>& pending,
                                   const std::vector<const RunningJob*>& running,
                                   std::vector<WorkerCapacity> free, absl::Time now,
                                   const SchedulingPolicy& policy, NeverFitsCache* never_fits) {
  return Pass(config, running, std::move(free), now, policy, never_fits).Run(pending);
}

}  // namespace ringmaster
