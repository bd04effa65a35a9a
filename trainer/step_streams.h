// A GPU rank's device, streams and the order between them, kept apart from
// CUDA so that it is tested on the CPU (trainer/fake_gpu.h):
//
// - the training stream runs forward and backward, and records an event on
//   each parameter's gradient as backward finishes it;
// - a bucket's collective and optimizer update run on the communication
//   stream, which first waits for the event of the bucket's last gradient
//   (a stream runs in order, so that covers the bucket's others too), and
//   for nothing later: the collective overlaps the rest of backward;
// - the next step's work on the training stream waits for every update.
//
// The CUDA runtime keeps a current device per thread, and a thread that
// never sets one works on device 0. Every thread calls EnterThread before
// any other call, and every call checks the calling thread's device, so
// work for a rank's GPU cannot be issued from another device's context.
#ifndef RINGMASTER_TRAINER_STEP_STREAMS_H_
#define RINGMASTER_TRAINER_STEP_STREAMS_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/reducer.h"

namespace ringmaster {

// The CUDA runtime calls the bookkeeping makes: the real runtime in
// trainer/cuda/cuda_stream_api.h, a model of its rules in FakeGpu.
class StreamApi {
 public:
  using Stream = void*;  // cudaStream_t
  using Event = void*;   // cudaEvent_t
  virtual ~StreamApi() = default;
  virtual absl::Status SetDevice(int device) = 0;
  virtual absl::StatusOr<int> GetDevice() = 0;
  // An event of the calling thread's device, for ordering (no timing).
  virtual absl::StatusOr<Event> CreateEvent() = 0;
  virtual void DestroyEvent(Event event) = 0;
  // `event` completes when the work enqueued on `stream` so far has.
  virtual absl::Status Record(Event event, Stream stream) = 0;
  // Work enqueued on `stream` after this waits for `event`.
  virtual absl::Status Wait(Stream stream, Event event) = 0;
};

// FAILED_PRECONDITION naming both devices when the calling thread's current
// device is not `device`: the one check before work for a rank's GPU.
absl::Status CheckDevice(StreamApi& api, int device);

// Thread-compatible per thread: the training thread calls GradientReady and
// AfterStep, the reducer's thread BeforeReduce; each parameter's event is
// recorded before its bucket is handed to the reducer.
class StepStreams {
 public:
  using Stream = StreamApi::Stream;

  // Makes `device` the calling thread's and creates one event per
  // parameter on it. `compute` and `comm` are streams of `device`.
  static absl::StatusOr<std::unique_ptr<StepStreams>> Create(StreamApi* api, int device,
                                                             Stream compute, Stream comm,
                                                             int params);
  ~StepStreams();

  int device() const { return device_; }
  // First on every thread that issues work for this rank.
  absl::Status EnterThread() { return api_->SetDevice(device_); }
  // CheckDevice for the rank's device.
  absl::Status CheckDevice() { return ringmaster::CheckDevice(*api_, device_); }

  // Training thread: the kernels enqueued so far wrote `param`'s gradient.
  absl::Status GradientReady(int param);
  // Reducer's thread, before the bucket's collective.
  absl::Status BeforeReduce(const Bucket& bucket);
  // Training thread, after the step's last update was enqueued.
  absl::Status AfterStep();

 private:
  StepStreams(StreamApi* api, int device, Stream compute, Stream comm)
      : api_(api), device_(device), compute_(compute), comm_(comm) {}

  StreamApi* const api_;
  const int device_;
  const Stream compute_;
  const Stream comm_;
  std::vector<StreamApi::Event> gradient_ready_;  // per parameter
  StreamApi::Event step_done_ = nullptr;
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_STEP_STREAMS_H_
