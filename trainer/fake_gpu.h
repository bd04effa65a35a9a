// A model of the CUDA runtime's devices, streams and events on the CPU, for
// tests of the GPU bookkeeping (StepStreams) without a GPU. It keeps the
// rules of the CUDA programming guide ("Stream and Event Behavior"):
//
// - each thread has a current device, 0 until it sets one;
// - a stream and an event belong to the device current when they were made;
// - a kernel launched on a stream of another device than the calling
//   thread's fails (cudaErrorInvalidResourceHandle);
// - recording an event on a stream of another device fails;
// - a stream may wait for an event of any device.
//
// Work is not run: each kernel is a named node, and Ordered() answers
// whether stream order and event waits make one finish before another
// starts.
#ifndef RINGMASTER_TRAINER_FAKE_GPU_H_
#define RINGMASTER_TRAINER_FAKE_GPU_H_

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "trainer/step_streams.h"

namespace ringmaster {

// Thread-safe.
class FakeGpu final : public StreamApi {
 public:
  explicit FakeGpu(int devices) : devices_(devices) {}

  // A stream of the calling thread's device.
  Stream NewStream();
  // A kernel named `name` (unique) on `stream`.
  absl::Status Launch(Stream stream, const std::string& name);
  // Whether kernel `before` must finish before kernel `after` starts.
  bool Ordered(const std::string& before, const std::string& after) const;
  int live_events() const;

  absl::Status SetDevice(int device) override;
  absl::StatusOr<int> GetDevice() override;
  absl::StatusOr<Event> CreateEvent() override;
  void DestroyEvent(Event event) override;
  absl::Status Record(Event event, Stream stream) override;
  absl::Status Wait(Stream stream, Event event) override;

 private:
  struct Node {
    std::string name;
    std::vector<int> after;  // nodes that finish before it starts
  };
  struct StreamState {
    int device = 0;
    int last = -1;  // the node its next work follows
  };
  struct EventState {
    int device = 0;
    int at = -1;  // the node it completes with; -1: never recorded
  };

  int Current() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int Find(const std::string& name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);  // -1: none
  int AddNode(StreamState& stream, std::string name, int also_after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int devices_;
  mutable Mutex mu_;
  std::map<std::thread::id, int> current_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<StreamState>> streams_ ABSL_GUARDED_BY(mu_);
  std::map<Event, std::unique_ptr<EventState>> events_ ABSL_GUARDED_BY(mu_);
  std::vector<Node> nodes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_FAKE_GPU_H_
