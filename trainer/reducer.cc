#include "trainer/reducer.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace ringmaster {

std::vector<Bucket> AssignBuckets(const std::vector<ParamSpan>& params, size_t bucket_bytes,
                                  size_t first_bucket_bytes) {
  std::vector<Bucket> buckets;
  Bucket current;
  size_t cap = first_bucket_bytes;
  for (int p = static_cast<int>(params.size()) - 1; p >= 0; --p) {
    const size_t bytes = params[p].size * sizeof(float);
    if (!current.params.empty() && (current.size * sizeof(float) + bytes) > cap) {
      buckets.push_back(std::move(current));
      current = Bucket();
      cap = bucket_bytes;
    }
    // Backward order is reverse memory order, so the bucket grows downward.
    current.offset = params[p].offset;
    current.size += params[p].size;
    current.params.push_back(p);
  }
  if (!current.params.empty()) buckets.push_back(std::move(current));
  return buckets;
}

Reducer::Reducer(Collective* comm, const std::vector<ParamSpan>& params, float* grads,
                 ReducerOptions options, EventLog* events)
    : comm_(comm),
      grads_(grads),
      options_(options),
      events_(events),
      buckets_(AssignBuckets(params, options.bucket_bytes, options.first_bucket_bytes)),
      bucket_of_param_(params.size(), -1),
      pending_(buckets_.size(), 0) {
  size_t largest = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (int p : buckets_[b].params) bucket_of_param_[p] = static_cast<int>(b);
    largest = std::max(largest, buckets_[b].size);
  }
  if (options_.bf16_compression && !options_.reduce_bf16) bf16_.resize(largest);
  {
    MutexLock lock(&mu_);
    last_bucket_seconds_.assign(buckets_.size(), 0);
  }
  thread_ = std::thread([this] { CommLoop(); });
}

Reducer::~Reducer() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void Reducer::Prepare(float divisor, std::function<absl::Status(const Bucket&)> on_reduced) {
  MutexLock lock(&mu_);
  divisor_ = divisor;
  on_reduced_ = std::move(on_reduced);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    pending_[b] = static_cast<int>(buckets_[b].params.size());
  }
  next_launch_ = 0;
  done_ = 0;
  error_ = absl::OkStatus();
}

void Reducer::MarkReady(int param) {
  const int b = bucket_of_param_[param];
  // Launch every leading bucket that is complete, in bucket order, so that
  // all ranks issue the same collectives in the same order.
  MutexLock lock(&mu_);
  --pending_[b];
  while (next_launch_ < static_cast<int>(buckets_.size()) && pending_[next_launch_] == 0) {
    if (events_) events_->Record(absl::StrCat("bucket ", next_launch_, " ready"));
    queue_.push_back(next_launch_++);
  }
}

absl::Status Reducer::Finish() {
  MutexLock lock(&mu_);
  const int total = static_cast<int>(buckets_.size());
  auto all_done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ == total; };
  mu_.Await(absl::Condition(&all_done));
  return error_;
}

void Reducer::CommLoop() {
  const absl::Status setup = options_.thread_setup ? options_.thread_setup() : absl::OkStatus();
  for (;;) {
    int b;
    float scale;
    std::function<absl::Status(const Bucket&)> on_reduced;
    {
      MutexLock lock(&mu_);
      auto has_work = [this]()
                          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&has_work));
      if (queue_.empty()) return;  // stopping
      b = queue_.front();
      queue_.pop_front();
      scale = 1.0f / divisor_;
      on_reduced = on_reduced_;
    }
    const auto start = std::chrono::steady_clock::now();
    if (events_) events_->Record(absl::StrCat("bucket ", b, " allreduce start"));
    if (options_.flight) options_.flight->Bucket(b);
    absl::Status status = setup;
    if (status.ok() && options_.before_reduce) status = options_.before_reduce(buckets_[b]);
    if (status.ok()) status = Reduce(buckets_[b], scale);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (events_) events_->Record(absl::StrCat("bucket ", b, " allreduce end"));
    if (options_.flight) options_.flight->Bucket(-1);
    if (status.ok() && on_reduced) status = on_reduced(buckets_[b]);
    MutexLock lock(&mu_);
    last_bucket_seconds_[b] = seconds;
    seconds_total_ += seconds;
    bytes_total_ += static_cast<double>(buckets_[b].size) *
                    (options_.bf16_compression ? sizeof(uint16_t) : sizeof(float));
    if (error_.ok() && !status.ok()) error_ = status;
    ++done_;
  }
}

absl::Status Reducer::Reduce(const Bucket& bucket, float scale) {
  float* data = grads_ + bucket.offset;
  if (!options_.bf16_compression) return comm_->AllReduceSum(data, bucket.size);
  // Average before compressing: bf16 keeps 8 bits of mantissa, and values
  // of one scale lose less when summed.
  if (options_.reduce_bf16) return options_.reduce_bf16(data, bucket.size, scale);
  for (size_t i = 0; i < bucket.size; ++i) bf16_[i] = FloatToBf16(data[i] * scale);
  absl::Status status = comm_->AllReduceSumBf16(bf16_.data(), bucket.size);
  for (size_t i = 0; i < bucket.size; ++i) data[i] = Bf16ToFloat(bf16_[i]);
  return status;
}

}  // namespace ringmaster
