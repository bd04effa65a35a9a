#include "coordinator/ha/leadership.h"

#include <spdlog/spdlog.h>

namespace ringmaster {

std::unique_ptr<Leadership> Leadership::Start(std::unique_ptr<Lease> lease,
                                              absl::Duration timeout) {
  std::unique_ptr<Leadership> leadership(new Leadership(std::move(lease), timeout));
  leadership->thread_ = std::thread([l = leadership.get()] { l->Run(); });
  return leadership;
}

Leadership::Leadership(std::unique_ptr<Lease> lease, absl::Duration timeout)
    : timeout_(timeout),
      interval_(std::min(absl::Seconds(1), timeout / 5)),
      lease_(std::move(lease)) {}

Leadership::~Leadership() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
  MutexLock lock(&step_mu_);
  if (lease_->state().leader) {
    if (absl::Status s = lease_->Release(); !s.ok()) {
      spdlog::warn("leader lease: not released ({}); a standby takes over once it runs out",
                   s.ToString());
    } else {
      spdlog::info("leader lease: released");
    }
  }
}

LeaseState Leadership::state() const {
  MutexLock lock(&mu_);
  return state_;
}

bool Leadership::WaitToLead(Notification* stop) const {
  while (!stop->WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
    if (state().leader) return true;
  }
  return false;
}

bool Leadership::WaitWhileLeading(Notification* stop) const {
  while (!stop->WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
    MutexLock lock(&mu_);
    if (!state_.leader) return true;
    if (absl::Now() - renewed_ >= timeout_) {
      spdlog::error("leader lease: not renewed for {}: stepping down",
                    absl::FormatDuration(absl::Now() - renewed_));
      return true;
    }
  }
  return false;
}

void Leadership::Run() {
  do {
    MutexLock lock(&step_mu_);
    Step();
  } while (!stop_.WaitForNotificationWithTimeout(interval_));
}

void Leadership::Step() {
  const absl::Time sent = absl::Now();
  absl::StatusOr<LeaseState> stepped = lease_->Step();
  // Said when it changes, not at every step of an outage.
  const std::string trouble = stepped.status().ToString();
  if (trouble != said_) {
    if (stepped.ok()) {
      spdlog::info("leader lease: the database answers again");
    } else {
      spdlog::warn("leader lease: {}", trouble);
    }
    said_ = trouble;
  }
  MutexLock lock(&mu_);
  if (stepped.ok() && stepped->leader) renewed_ = sent;
  state_ = lease_->state();
}

}  // namespace ringmaster
