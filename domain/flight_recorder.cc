#include "domain/flight_recorder.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ringmaster {

static_assert(std::atomic<int64_t>::is_always_lock_free &&
                  std::atomic<int32_t>::is_always_lock_free,
              "the worker reads the record as plain integers");

const char* PhaseName(TrainPhase phase) {
  switch (phase) {
    case TrainPhase::kStarting:
      return "start-up";
    case TrainPhase::kData:
      return "data loading";
    case TrainPhase::kForward:
      return "forward";
    case TrainPhase::kBackward:
      return "backward";
    case TrainPhase::kAllReduce:
      return "all-reduce";
    case TrainPhase::kOptimizer:
      return "the optimizer";
    case TrainPhase::kCheckpoint:
      return "a checkpoint";
    case TrainPhase::kEvaluate:
      return "evaluation";
    case TrainPhase::kDone:
      return "the end of training";
  }
  return "an unknown phase";
}

absl::StatusOr<std::unique_ptr<FlightRecorder>> FlightRecorder::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("flight record ", path, ": ", strerror(errno)));
  }
  absl::Cleanup close_fd = [fd] { close(fd); };
  if (ftruncate(fd, sizeof(Shared)) != 0) {
    return absl::UnavailableError(absl::StrCat("flight record ", path, ": ", strerror(errno)));
  }
  void* mapped = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapped == MAP_FAILED) {
    return absl::UnavailableError(absl::StrCat("flight record ", path, ": ", strerror(errno)));
  }
  Shared* shared = new (mapped) Shared{Shared::kMagic, 1, {0}, {0}, {-1}, {0}};
  std::unique_ptr<FlightRecorder> recorder(new FlightRecorder(shared));
  recorder->Phase(TrainPhase::kStarting);
  return recorder;
}

FlightRecorder::~FlightRecorder() { munmap(shared_, sizeof(Shared)); }

void FlightRecorder::Step(int64_t step) { shared_->step.store(step, std::memory_order_relaxed); }

void FlightRecorder::Phase(TrainPhase phase) {
  shared_->phase.store(static_cast<int32_t>(phase), std::memory_order_relaxed);
  shared_->since_unix_ms.store(absl::ToUnixMillis(absl::Now()), std::memory_order_relaxed);
}

void FlightRecorder::Bucket(int32_t bucket) {
  shared_->bucket.store(bucket, std::memory_order_relaxed);
}

absl::StatusOr<FlightState> ReadFlightRecord(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("no flight record at ", path, ": ", strerror(errno)));
  }
  absl::Cleanup close_fd = [fd] { close(fd); };
  return ReadFlightRecord(fd, path);
}

absl::StatusOr<FlightState> ReadFlightRecord(int fd, const std::string& what) {
  // Plain integers at the atomics' offsets: a rank may be stopped mid-store,
  // and each field is one aligned word.
  struct Raw {
    uint32_t magic;
    uint32_t version;
    int64_t step;
    int32_t phase;
    int32_t bucket;
    int64_t since_unix_ms;
  } raw;
  static_assert(sizeof(Raw) == sizeof(FlightRecorder::Shared), "one layout");
  if (pread(fd, &raw, sizeof(raw), 0) != static_cast<ssize_t>(sizeof(raw)) ||
      raw.magic != FlightRecorder::Shared::kMagic || raw.phase < 0 ||
      raw.phase > static_cast<int32_t>(TrainPhase::kDone)) {
    return absl::DataLossError(absl::StrCat(what, " is not a flight record"));
  }
  return FlightState{raw.step, static_cast<TrainPhase>(raw.phase), raw.bucket, raw.since_unix_ms};
}

}  // namespace ringmaster
