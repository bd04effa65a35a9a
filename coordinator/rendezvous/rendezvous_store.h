// The key-value store ranks bootstrap from (Gloo's Store, NCCL's unique id,
// user scripts). Keys live in a scope per job attempt: the JobManager opens
// a scope when an attempt starts and drops it when the attempt ends, so a
// restarted job never sees the last attempt's keys.
//
// With a journal (coordinators sharing PostgreSQL), every key is durable
// before its Set or Add is answered, and the next leader restores the
// scopes of the attempts it finds running: an attempt that was starting
// when the leader was lost goes on with the keys its ranks had set.
#ifndef RINGMASTER_COORDINATOR_RENDEZVOUS_RENDEZVOUS_STORE_H_
#define RINGMASTER_COORDINATOR_RENDEZVOUS_RENDEZVOUS_STORE_H_

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/limits.h"
#include "common/mutex.h"

namespace ringmaster {

struct ScopeId {
  std::string job_id;
  int attempt = 0;
  bool operator<(const ScopeId& o) const {
    return std::tie(job_id, attempt) < std::tie(o.job_id, o.attempt);
  }
};

struct RendezvousLimits {
  int64_t max_value_bytes = kDefaultMaxRendezvousValueBytes;
  int64_t max_scope_bytes = kDefaultMaxRendezvousScopeBytes;  // an attempt's keys and values
};

using ScopeValues = std::map<std::string, std::string>;
using ScopesValues = std::map<ScopeId, ScopeValues>;

// Where the keys are kept durably (coordinator/pg_rendezvous_journal.h).
// Thread-safe.
class RendezvousJournal {
 public:
  virtual ~RendezvousJournal() = default;
  // Queues `key` = `value` in `scope`, kept in the order of the calls,
  // without waiting; a ticket for WaitDurable.
  virtual absl::StatusOr<int64_t> Put(const ScopeId& scope, const std::string& key,
                                      const std::string& value) = 0;
  // Returns once the Put that gave `ticket` is durable.
  virtual absl::Status WaitDurable(int64_t ticket) = 0;
  // Forgets the scope's keys; need not wait for it.
  virtual void Drop(const ScopeId& scope) = 0;
  virtual absl::StatusOr<ScopesValues> Load() = 0;
};

// Thread-safe: one mutex guards all scopes. Wait callbacks run on the
// calling thread of Set/Add/ExpireWaiters/DropScope, outside the mutex, and
// must not block.
class RendezvousStore {
 public:
  using WaitCallback = std::function<void(absl::Status)>;

  // `journal`, when given, keeps every key durably.
  explicit RendezvousStore(const Clock* clock, RendezvousLimits limits = {},
                           RendezvousJournal* journal = nullptr)
      : clock_(clock), limits_(limits), journal_(journal) {}

  // Reads the journal's scopes, for OpenScope to restore; before any scope
  // is opened.
  absl::Status Restore();
  // Opens the scope, with its keys when Restore found it.
  void OpenScope(const ScopeId& scope);
  // Forgets the scopes Restore found that no OpenScope asked for (attempts
  // that ended), in the journal too.
  void EndRestore();
  // Drops every key; pending waiters finish with ABORTED.
  void DropScope(const ScopeId& scope);

  // Each of these is NOT_FOUND when the scope is not open. Set and Add are
  // RESOURCE_EXHAUSTED, naming the limit, when the value or the scope's
  // bytes would pass it, and the journal's error when it could not keep
  // the key (the key is set in memory all the same, and a Set made again
  // sets it again).
  absl::Status Set(const ScopeId& scope, const std::string& key, std::string value);
  // NOT_FOUND when the key is not set.
  absl::StatusOr<std::string> Get(const ScopeId& scope, const std::string& key);
  // Adds `delta` to the decimal integer at `key` (0 when unset) and returns
  // the sum; INVALID_ARGUMENT when the key holds something else.
  absl::StatusOr<int64_t> Add(const ScopeId& scope, const std::string& key, int64_t delta);
  // Calls `done` exactly once: OK as soon as every key is set,
  // DEADLINE_EXCEEDED once the clock passes `deadline` (seen at the next
  // ExpireWaiters), ABORTED when the scope is dropped.
  void Wait(const ScopeId& scope, std::vector<std::string> keys, absl::Time deadline,
            WaitCallback done);
  // Blocking form of Wait for in-process callers.
  absl::Status WaitBlocking(const ScopeId& scope, std::vector<std::string> keys,
                            absl::Time deadline);

  // Finishes waiters whose deadline has passed. Called by a timer.
  void ExpireWaiters();

  // For shutdown: finishes every pending waiter, and every later Wait at
  // once, with UNAVAILABLE, so that no call is left for the server to wait
  // on.
  void Close();

 private:
  struct Waiter {
    std::vector<std::string> keys;
    absl::Time deadline;
    WaitCallback done;
  };
  struct Scope {
    std::map<std::string, std::string> values;
    int64_t bytes = 0;  // of its keys and values
    std::list<Waiter> waiters;
  };
  using Ready = std::vector<std::pair<WaitCallback, absl::Status>>;

  static bool AllSet(const Scope& scope, const std::vector<std::string>& keys);
  // Moves waiters of `scope` whose keys are all set into `ready`.
  static void CollectReady(Scope& scope, Ready* ready);
  static void Run(Ready& ready);

  // Stores `value` at `key`, within the limits.
  absl::Status Put(Scope& scope, const std::string& key, std::string value) const;
  // Queues `key`'s new value in the journal, if there is one (under the
  // mutex, so that the journal keeps the order of the changes): a ticket,
  // or 0 when there is no journal.
  absl::StatusOr<int64_t> Journal(const ScopeId& scope, const std::string& key,
                                  const std::string& value) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits until `ticket` is durable, then runs `ready`.
  absl::Status Keep(const std::string& key, const absl::StatusOr<int64_t>& ticket, Ready& ready);

  const Clock* const clock_;
  const RendezvousLimits limits_;
  RendezvousJournal* const journal_;
  Mutex mu_;
  std::map<ScopeId, Scope> scopes_ ABSL_GUARDED_BY(mu_);
  ScopesValues restored_ ABSL_GUARDED_BY(mu_);  // not opened yet
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_RENDEZVOUS_RENDEZVOUS_STORE_H_
