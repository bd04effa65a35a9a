#include "coordinator/rendezvous/rendezvous_store.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/mutex.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

absl::Status ScopeNotOpen(const ScopeId& scope) {
  return absl::NotFoundError(
      absl::StrCat("no running attempt ", scope.attempt, " of job ", scope.job_id));
}

absl::Status ShuttingDown() {
  return absl::UnavailableError("the coordinator is shutting down; wait again once it is back");
}

}  // namespace

bool RendezvousStore::AllSet(const Scope& scope, const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    if (scope.values.count(key) == 0) return false;
  }
  return true;
}

void RendezvousStore::CollectReady(Scope& scope, Ready* ready) {
  for (auto it = scope.waiters.begin(); it != scope.waiters.end();) {
    if (AllSet(scope, it->keys)) {
      ready->emplace_back(std::move(it->done), absl::OkStatus());
      it = scope.waiters.erase(it);
    } else {
      ++it;
    }
  }
}

void RendezvousStore::Run(Ready& ready) {
  for (auto& [done, status] : ready) done(status);
}

absl::Status RendezvousStore::Restore() {
  if (journal_ == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(ScopesValues found, journal_->Load());
  MutexLock lock(&mu_);
  restored_ = std::move(found);
  return absl::OkStatus();
}

void RendezvousStore::OpenScope(const ScopeId& scope) {
  MutexLock lock(&mu_);
  Scope& open = scopes_[scope];
  auto restored = restored_.find(scope);
  if (restored == restored_.end()) return;
  for (auto& [key, value] : restored->second) {
    open.bytes += static_cast<int64_t>(key.size() + value.size());
    open.values[key] = std::move(value);
  }
  restored_.erase(restored);
}

void RendezvousStore::EndRestore() {
  ScopesValues ended;
  {
    MutexLock lock(&mu_);
    ended.swap(restored_);
  }
  for (const auto& [scope, values] : ended) journal_->Drop(scope);
}

void RendezvousStore::DropScope(const ScopeId& scope) {
  Ready ready;
  {
    MutexLock lock(&mu_);
    auto it = scopes_.find(scope);
    if (it == scopes_.end()) return;
    for (Waiter& w : it->second.waiters) {
      ready.emplace_back(std::move(w.done),
                         absl::AbortedError(absl::StrCat("attempt ", scope.attempt, " of job ",
                                                         scope.job_id, " ended while waiting")));
    }
    scopes_.erase(it);
    if (journal_ != nullptr) journal_->Drop(scope);  // after every Put to it
  }
  Run(ready);
}

absl::StatusOr<int64_t> RendezvousStore::Journal(const ScopeId& scope, const std::string& key,
                                                 const std::string& value) {
  return journal_ != nullptr ? journal_->Put(scope, key, value) : 0;
}

absl::Status RendezvousStore::Keep(const std::string& key, const absl::StatusOr<int64_t>& ticket,
                                   Ready& ready) {
  absl::Status kept = ticket.status();
  if (kept.ok() && *ticket > 0) kept = journal_->WaitDurable(*ticket);
  // Waiters go on either way: the key is set here.
  Run(ready);
  if (kept.ok()) return kept;
  return absl::Status(kept.code(),
                      absl::StrCat("the coordinator could not keep key \"", key.substr(0, 64),
                                   "\" durably; set it again: ", kept.message()));
}

absl::Status RendezvousStore::Set(const ScopeId& scope, const std::string& key, std::string value) {
  Ready ready;
  absl::StatusOr<int64_t> ticket;
  {
    MutexLock lock(&mu_);
    auto it = scopes_.find(scope);
    if (it == scopes_.end()) return ScopeNotOpen(scope);
    RETURN_IF_ERROR(Put(it->second, key, std::move(value)));
    ticket = Journal(scope, key, it->second.values[key]);
    CollectReady(it->second, &ready);
  }
  return Keep(key, ticket, ready);
}

absl::StatusOr<std::string> RendezvousStore::Get(const ScopeId& scope, const std::string& key) {
  MutexLock lock(&mu_);
  auto it = scopes_.find(scope);
  if (it == scopes_.end()) return ScopeNotOpen(scope);
  auto value = it->second.values.find(key);
  if (value == it->second.values.end()) {
    return absl::NotFoundError(absl::StrCat("key \"", key, "\" is not set"));
  }
  return value->second;
}

absl::StatusOr<int64_t> RendezvousStore::Add(const ScopeId& scope, const std::string& key,
                                             int64_t delta) {
  Ready ready;
  absl::StatusOr<int64_t> ticket;
  int64_t sum = 0;
  {
    MutexLock lock(&mu_);
    auto it = scopes_.find(scope);
    if (it == scopes_.end()) return ScopeNotOpen(scope);
    auto held = it->second.values.find(key);
    int64_t current = 0;
    if (held != it->second.values.end() && !held->second.empty() &&
        !absl::SimpleAtoi(held->second, &current)) {
      return absl::InvalidArgumentError(absl::StrCat("key \"", key, "\" does not hold an integer"));
    }
    sum = current + delta;
    RETURN_IF_ERROR(Put(it->second, key, absl::StrCat(sum)));
    ticket = Journal(scope, key, it->second.values[key]);
    CollectReady(it->second, &ready);
  }
  RETURN_IF_ERROR(Keep(key, ticket, ready));
  return sum;
}

void RendezvousStore::Wait(const ScopeId& scope, std::vector<std::string> keys, absl::Time deadline,
                           WaitCallback done) {
  absl::Status status;
  {
    MutexLock lock(&mu_);
    auto it = scopes_.find(scope);
    if (closed_) {
      status = ShuttingDown();
    } else if (it == scopes_.end()) {
      status = ScopeNotOpen(scope);
    } else if (AllSet(it->second, keys)) {
      status = absl::OkStatus();
    } else if (clock_->Now() >= deadline) {
      status = absl::DeadlineExceededError("keys not set before the deadline");
    } else {
      it->second.waiters.push_back({std::move(keys), deadline, std::move(done)});
      return;
    }
  }
  done(status);
}

absl::Status RendezvousStore::WaitBlocking(const ScopeId& scope, std::vector<std::string> keys,
                                           absl::Time deadline) {
  Notification notified;
  absl::Status result;
  Wait(scope, std::move(keys), deadline, [&](absl::Status s) {
    result = std::move(s);
    notified.Notify();
  });
  notified.WaitForNotification();
  return result;
}

absl::Status RendezvousStore::Put(Scope& scope, const std::string& key, std::string value) const {
  if (static_cast<int64_t>(value.size()) > limits_.max_value_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a value of ", value.size(), " bytes for key \"", key.substr(0, 64), "\"; the limit is ",
        limits_.max_value_bytes, " (coordinator --max-rendezvous-value-bytes)"));
  }
  auto it = scope.values.find(key);
  const int64_t before =
      it == scope.values.end() ? 0 : static_cast<int64_t>(key.size() + it->second.size());
  const int64_t after = scope.bytes - before + static_cast<int64_t>(key.size() + value.size());
  if (after > limits_.max_scope_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this attempt's keys and values would hold ", after, " bytes; the limit is ",
                     limits_.max_scope_bytes, " (coordinator --max-rendezvous-scope-bytes)"));
  }
  scope.bytes = after;
  scope.values[key] = std::move(value);
  return absl::OkStatus();
}

void RendezvousStore::Close() {
  Ready ready;
  {
    MutexLock lock(&mu_);
    closed_ = true;
    for (auto& [id, scope] : scopes_) {
      for (Waiter& w : scope.waiters) ready.emplace_back(std::move(w.done), ShuttingDown());
      scope.waiters.clear();
    }
  }
  Run(ready);
}

void RendezvousStore::ExpireWaiters() {
  Ready ready;
  {
    MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    for (auto& [id, scope] : scopes_) {
      for (auto it = scope.waiters.begin(); it != scope.waiters.end();) {
        if (it->deadline <= now) {
          std::string missing;
          for (const auto& key : it->keys) {
            if (scope.values.count(key) == 0) {
              absl::StrAppend(&missing, missing.empty() ? "" : ", ", key);
            }
          }
          ready.emplace_back(std::move(it->done),
                             absl::DeadlineExceededError(
                                 absl::StrCat("keys not set before the deadline: ", missing)));
          it = scope.waiters.erase(it);
        } else {
          ++it;
        }
      }
    }
  }
  Run(ready);
}

}  // namespace ringmaster
