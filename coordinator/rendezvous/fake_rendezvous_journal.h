// A RendezvousJournal in memory: what is durable, in the order it was
// queued. A test can hold tickets back (so that a Put waits) or make every
// call fail as an unreachable database would.
#ifndef RINGMASTER_COORDINATOR_RENDEZVOUS_FAKE_RENDEZVOUS_JOURNAL_H_
#define RINGMASTER_COORDINATOR_RENDEZVOUS_FAKE_RENDEZVOUS_JOURNAL_H_

#include <map>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status_macros.h"
#include "coordinator/rendezvous/rendezvous_store.h"

namespace ringmaster {

class FakeRendezvousJournal final : public RendezvousJournal {
 public:
  absl::StatusOr<int64_t> Put(const ScopeId& scope, const std::string& key,
                              const std::string& value) override {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(down_);
    scopes_[scope][key] = value;
    return ++queued_;
  }
  absl::Status WaitDurable(int64_t ticket) override {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(down_);
    waiting_.push_back(ticket);
    mu_.Await(absl::Condition(this, &FakeRendezvousJournal::Released));
    return absl::OkStatus();
  }
  void Drop(const ScopeId& scope) override {
    MutexLock lock(&mu_);
    scopes_.erase(scope);
    dropped_.push_back(scope);
  }
  absl::StatusOr<ScopesValues> Load() override {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(down_);
    return scopes_;
  }

  void SetDown(absl::Status status) {
    MutexLock lock(&mu_);
    down_ = std::move(status);
  }
  // While held, WaitDurable waits.
  void Hold(bool holding) {
    MutexLock lock(&mu_);
    holding_ = holding;
  }
  // The tickets waited for so far.
  std::vector<int64_t> waited() {
    MutexLock lock(&mu_);
    return waiting_;
  }
  ScopesValues scopes() {
    MutexLock lock(&mu_);
    return scopes_;
  }
  std::vector<ScopeId> dropped() {
    MutexLock lock(&mu_);
    return dropped_;
  }

 private:
  bool Released() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !holding_; }

  Mutex mu_;
  ScopesValues scopes_ ABSL_GUARDED_BY(mu_);
  std::vector<ScopeId> dropped_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> waiting_ ABSL_GUARDED_BY(mu_);
  int64_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  bool holding_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status down_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_RENDEZVOUS_FAKE_RENDEZVOUS_JOURNAL_H_
