// The key-value store ranks bootstrap from (Gloo's Store, NCCL's unique id,
// user scripts). Keys live in a scope per job attempt: the JobManager opens
// a scope when an attempt starts and drops it when the attempt ends, so a
// restarted job never sees the last attempt's keys.
#ifndef RINGMASTER_COORDINATOR_RENDEZVOUS_STORE_H_
#define RINGMASTER_COORDINATOR_RENDEZVOUS_STORE_H_

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

// Thread-safe: one mutex guards all scopes. Wait callbacks run on the
// calling thread of Set/Add/ExpireWaiters/DropScope, outside the mutex, and
// must not block.
class RendezvousStore {
 public:
  using WaitCallback = std::function<void(absl::Status)>;

  explicit RendezvousStore(const Clock* clock, RendezvousLimits limits = {})
      : clock_(clock), limits_(limits) {}

  void OpenScope(const ScopeId& scope);
  // Drops every key; pending waiters finish with ABORTED.
  void DropScope(const ScopeId& scope);

  // Each of these is NOT_FOUND when the scope is not open. Set and Add are
  // RESOURCE_EXHAUSTED, naming the limit, when the value or the scope's
  // bytes would pass it.
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

  const Clock* const clock_;
  const RendezvousLimits limits_;
  Mutex mu_;
  std::map<ScopeId, Scope> scopes_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_RENDEZVOUS_STORE_H_
