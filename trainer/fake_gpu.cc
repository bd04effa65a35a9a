#include "trainer/fake_gpu.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringmaster {

int FakeGpu::Current() const {
  auto it = current_.find(std::this_thread::get_id());
  return it == current_.end() ? 0 : it->second;
}

int FakeGpu::Find(const std::string& name) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int FakeGpu::AddNode(StreamState& stream, std::string name, int also_after) {
  Node node{std::move(name), {}};
  for (int before : {stream.last, also_after}) {
    if (before >= 0) node.after.push_back(before);
  }
  nodes_.push_back(std::move(node));
  stream.last = static_cast<int>(nodes_.size()) - 1;
  return stream.last;
}

StreamApi::Stream FakeGpu::NewStream() {
  MutexLock lock(&mu_);
  streams_.push_back(std::make_unique<StreamState>());
  streams_.back()->device = Current();
  return streams_.back().get();
}

absl::Status FakeGpu::Launch(Stream stream, const std::string& name) {
  MutexLock lock(&mu_);
  auto& s = *static_cast<StreamState*>(stream);
  if (s.device != Current()) {
    return absl::InvalidArgumentError(absl::StrCat("invalid resource handle: ", name,
                                                   " on a stream of device ", s.device,
                                                   " launched from device ", Current()));
  }
  AddNode(s, name, -1);
  return absl::OkStatus();
}

bool FakeGpu::Ordered(const std::string& before, const std::string& after) const {
  MutexLock lock(&mu_);
  const int from = Find(before);
  const int to = Find(after);
  if (from < 0 || to < 0) return false;
  // Walks back from `after` through everything it waits for.
  std::vector<bool> seen(nodes_.size(), false);
  std::vector<int> stack = {to};
  while (!stack.empty()) {
    const int n = stack.back();
    stack.pop_back();
    for (int prior : nodes_[n].after) {
      if (prior == from) return true;
      if (!seen[prior]) {
        seen[prior] = true;
        stack.push_back(prior);
      }
    }
  }
  return false;
}

int FakeGpu::live_events() const {
  MutexLock lock(&mu_);
  return static_cast<int>(events_.size());
}

absl::Status FakeGpu::SetDevice(int device) {
  if (device < 0 || device >= devices_) {
    return absl::InvalidArgumentError(absl::StrCat("invalid device ordinal ", device));
  }
  MutexLock lock(&mu_);
  current_[std::this_thread::get_id()] = device;
  return absl::OkStatus();
}

absl::StatusOr<int> FakeGpu::GetDevice() {
  MutexLock lock(&mu_);
  return Current();
}

absl::StatusOr<StreamApi::Event> FakeGpu::CreateEvent() {
  MutexLock lock(&mu_);
  auto event = std::make_unique<EventState>();
  event->device = Current();
  Event handle = event.get();
  events_.emplace(handle, std::move(event));
  return handle;
}

void FakeGpu::DestroyEvent(Event event) {
  MutexLock lock(&mu_);
  events_.erase(event);
}

absl::Status FakeGpu::Record(Event event, Stream stream) {
  MutexLock lock(&mu_);
  auto it = events_.find(event);
  if (it == events_.end()) return absl::InvalidArgumentError("invalid resource handle: event");
  const auto& s = *static_cast<StreamState*>(stream);
  if (it->second->device != s.device) {
    return absl::InvalidArgumentError(absl::StrCat("invalid resource handle: an event of device ",
                                                   it->second->device,
                                                   " recorded on a stream of device ", s.device));
  }
  it->second->at = s.last;
  return absl::OkStatus();
}

absl::Status FakeGpu::Wait(Stream stream, Event event) {
  MutexLock lock(&mu_);
  auto it = events_.find(event);
  if (it == events_.end()) return absl::InvalidArgumentError("invalid resource handle: event");
  auto& s = *static_cast<StreamState*>(stream);
  // A node of its own, so that what is recorded after the wait includes it.
  AddNode(s, "", it->second->at);
  return absl::OkStatus();
}

}  // namespace ringmaster
