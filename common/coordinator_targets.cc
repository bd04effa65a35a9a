#include "common/coordinator_targets.h"

#include <algorithm>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringmaster {

std::vector<std::string> SplitAddresses(const std::string& list) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (!part.empty()) out.emplace_back(part);
  }
  return out;
}

std::string LeaderNamedIn(const std::string& message) {
  const size_t at = message.find(kLeaderIsAt);
  if (at == std::string::npos) return "";
  absl::string_view rest = absl::string_view(message).substr(at + sizeof(kLeaderIsAt) - 1);
  return std::string(rest.substr(0, rest.find_first_of(" ,;)")));
}

CoordinatorTargets::CoordinatorTargets(const std::string& list, Tls tls, MakeChannel make_channel)
    : addresses_(SplitAddresses(list)),
      tls_(std::move(tls)),
      make_channel_(std::move(make_channel)) {
  MutexLock lock(&mu_);
  current_ = addresses_.empty() ? list : addresses_.front();
}

std::shared_ptr<grpc::Channel> CoordinatorTargets::ChannelLocked(const std::string& address) {
  std::shared_ptr<grpc::Channel>& channel = channels_[address];
  if (channel == nullptr) {
    channel = make_channel_ ? make_channel_(address) : CoordinatorChannel(address, tls_);
  }
  return channel;
}

CoordinatorTargets::Target CoordinatorTargets::Current(absl::Duration connect_timeout) {
  Target target;
  {
    MutexLock lock(&mu_);
    target = {current_, ChannelLocked(current_)};
  }
  if (several()) {
    target.channel->WaitForConnected(absl::ToChronoTime(absl::Now() + connect_timeout));
  }
  return target;
}

bool CoordinatorTargets::Follow(const grpc::Status& status, const std::string& used,
                                absl::Time deadline, bool idempotent) {
  // A standby that becomes the leader, or stops, cancels the reads it was
  // serving: as with a paused coordinator, an idempotent call goes elsewhere.
  const bool gone = status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                    status.error_code() == grpc::StatusCode::CANCELLED;
  const bool refused =
      status.error_code() == grpc::StatusCode::UNAVAILABLE || (idempotent && several() && gone);
  // A standby may name any address. Calls carry credentials, so they go
  // there only when TLS will check that it is the coordinator, or when it
  // is one of the addresses given.
  std::string leader = refused ? LeaderNamedIn(status.error_message()) : "";
  if (!tls_ && std::find(addresses_.begin(), addresses_.end(), leader) == addresses_.end()) {
    leader.clear();
  }
  if (!refused || (!several() && leader.empty()) || absl::Now() >= deadline) {
    MutexLock lock(&mu_);
    misses_ = 0;
    return false;
  }
  absl::Duration pause;
  {
    MutexLock lock(&mu_);
    if (current_ == used) {  // not moved already by another call
      if (!leader.empty() && leader != used) {
        current_ = leader;
      } else {
        auto it = std::find(addresses_.begin(), addresses_.end(), used);
        current_ =
            it == addresses_.end() || it + 1 == addresses_.end() ? addresses_.front() : *(it + 1);
      }
    }
    // A whole round without a leader: one is being elected.
    if (++misses_ % std::max<int>(1, addresses_.size()) == 0) pause = absl::Milliseconds(250);
  }
  absl::SleepFor(std::min(pause, std::max(absl::ZeroDuration(), deadline - absl::Now())));
  return true;
}

grpc::Status CoordinatorTargets::Call(absl::Time deadline, bool idempotent,
                                      const std::function<grpc::Status(const Target&)>& call,
                                      std::string* used) {
  for (;;) {
    const Target target = Current();
    grpc::Status status = call(target);
    if (status.ok() || !Follow(status, target.address, deadline, idempotent)) {
      if (used != nullptr) *used = target.address;
      return status;
    }
  }
}

}  // namespace ringmaster
