// Gradient buckets all-reduced while the backward pass is still running,
// after PyTorch DDP's Reducer: parameters are grouped in backward order
// into buckets of about `bucket_bytes` (the first one small, so that
// communication starts early); when the last gradient of a bucket is final,
// the bucket's all-reduce starts on a communication thread.
#ifndef RINGMASTER_TRAINER_REDUCER_H_
#define RINGMASTER_TRAINER_REDUCER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/mutex.h"
#include "domain/flight_recorder.h"
#include "trainer/collective.h"
#include "trainer/event_log.h"
#include "trainer/mlp.h"

namespace ringmaster {

struct Bucket;

struct ReducerOptions {
  size_t bucket_bytes = 25u << 20;
  size_t first_bucket_bytes = 1u << 20;
  bool bf16_compression = false;
  // Runs first on the reducer's thread (a GPU runner sets the thread's
  // device there); its error fails every pass, and nothing is reduced.
  std::function<absl::Status()> thread_setup;
  // Runs on the reducer's thread before a bucket's all-reduce (a GPU orders
  // the collective after the kernels that wrote the bucket).
  std::function<absl::Status(const Bucket&)> before_reduce;
  // With bf16_compression: scales `n` gradients at `data` by `scale`,
  // all-reduces them as bfloat16 and widens them back. Empty: on the host.
  std::function<absl::Status(float* data, size_t n, float scale)> reduce_bf16;
  // Told the bucket whose all-reduce is in flight (-1 after it); may be null.
  FlightRecorder* flight = nullptr;
};

struct Bucket {
  size_t offset = 0;        // floats, into the gradient buffer
  size_t size = 0;          // floats
  std::vector<int> params;  // parameter indices, backward order
};

// Threading: Prepare, MarkReady and Finish are called by the training
// thread; the collectives run on the reducer's own thread, which is the
// only user of the Collective while a backward pass is in flight.
class Reducer {
 public:
  Reducer(Collective* comm, const std::vector<ParamSpan>& params, float* grads,
          ReducerOptions options, EventLog* events = nullptr);
  ~Reducer();

  const std::vector<Bucket>& buckets() const { return buckets_; }

  // Before a backward pass that communicates. The mean gradient is the
  // reduced sum divided by `divisor` (the world size); see grad_scale().
  // `on_reduced`, when set, runs on the communication thread for each
  // bucket right after its all-reduce (the trainer applies the optimizer
  // there, overlapping it with the rest of the backward pass).
  void Prepare(float divisor, std::function<absl::Status(const Bucket&)> on_reduced = nullptr);
  // Parameter `param`'s gradient is final for this pass.
  void MarkReady(int param);
  // Waits for every bucket; returns the first collective error.
  absl::Status Finish();
  // What the reduced gradients must be multiplied by to be the mean: the
  // fp32 path leaves the division to the optimizer's pass over them (one
  // pass fewer); the bf16 path divides before compressing and returns 1.
  float grad_scale() const {
    MutexLock lock(&mu_);
    return options_.bf16_compression ? 1.0f : 1.0f / divisor_;
  }

  // Totals since construction.
  double bytes_total() const {
    MutexLock lock(&mu_);
    return bytes_total_;
  }
  double seconds_total() const {
    MutexLock lock(&mu_);
    return seconds_total_;
  }
  // Of the last Finish: the wall time spent in all-reduce per bucket.
  std::vector<double> last_bucket_seconds() const {
    MutexLock lock(&mu_);
    return last_bucket_seconds_;
  }

 private:
  void CommLoop();
  // Sums the bucket over the ranks; `scale` is 1/divisor (bf16 only).
  absl::Status Reduce(const Bucket& bucket, float scale);

  Collective* const comm_;
  float* const grads_;
  const ReducerOptions options_;
  EventLog* const events_;
  std::vector<Bucket> buckets_;       // fixed after construction
  std::vector<int> bucket_of_param_;  // fixed after construction
  std::vector<uint16_t> bf16_;        // compression scratch: the reducer's thread only

  mutable Mutex mu_;
  std::vector<int> pending_ ABSL_GUARDED_BY(mu_);  // per bucket: gradients not yet final
  int next_launch_ ABSL_GUARDED_BY(mu_) = 0;       // buckets launch in order
  float divisor_ ABSL_GUARDED_BY(mu_) = 1;
  std::function<absl::Status(const Bucket&)> on_reduced_ ABSL_GUARDED_BY(mu_);
  double bytes_total_ ABSL_GUARDED_BY(mu_) = 0;
  double seconds_total_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<double> last_bucket_seconds_ ABSL_GUARDED_BY(mu_);
  std::deque<int> queue_ ABSL_GUARDED_BY(mu_);
  int done_ ABSL_GUARDED_BY(mu_) = 0;  // buckets reduced in this pass
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// Buckets over `params` (memory order) in reverse order, each at most
// `bucket_bytes` (the first `first_bucket_bytes`) unless one parameter is
// larger.
std::vector<Bucket> AssignBuckets(const std::vector<ParamSpan>& params, size_t bucket_bytes,
                                  size_t first_bucket_bytes);

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_REDUCER_H_
