#include "trainer/shm_allreduce.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "trainer/catch_status.h"
#include "trainer/host_layout.h"

namespace ringmaster {

// At the start of the segment; the slots follow, 64-byte aligned.
struct ShmAllReduce::Header {
  std::atomic<uint32_t> arrived;
  std::atomic<uint32_t> generation;  // futex word: bumped by the last arrival
  uint32_t size;
  std::atomic<int32_t> departed;  // 1 + the first rank that left; 0 while all are here
};

namespace {

constexpr size_t kHeaderBytes = 64;

long Futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  // Shared (not FUTEX_PRIVATE): the word lives in memory of several processes.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

// Two sets (one per chunk parity) of `size` slots and a result.
size_t SegmentBytes(int size) {
  return kHeaderBytes +
         2 * (static_cast<size_t>(size) + 1) * ShmAllReduce::kChunkFloats * sizeof(float);
}

template <typename F>
absl::Status StoreCall(F body) {
  return CatchAsStatus("rendezvous store", body);
}

}  // namespace

namespace {

struct Segment {
  void* base = nullptr;
  std::string name;
};

// Rank 0 creates a shared-memory object of `bytes` and publishes its name
// under `key`; the others open it. Everyone maps it. The caller unlinks the
// name (rank 0) once every rank has mapped it.
absl::StatusOr<Segment> MapSegment(gloo::rendezvous::Store& store, const std::string& key, int rank,
                                   size_t bytes) {
  Segment segment;
  int fd = -1;
  if (rank == 0) {
    std::random_device random;
    segment.name = absl::StrCat("/ringmaster-", getpid(), "-", random(), random());
    fd = shm_open(segment.name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      return absl::UnavailableError(absl::StrCat("shm_open ", segment.name, ": ", strerror(errno)));
    }
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      const int error = errno;
      close(fd);
      shm_unlink(segment.name.c_str());
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot size shared memory to ", bytes, " bytes: ", strerror(error)));
    }
    absl::Status published = StoreCall(
        [&] { store.set(key, std::vector<char>(segment.name.begin(), segment.name.end())); });
    if (!published.ok()) {
      close(fd);
      shm_unlink(segment.name.c_str());
      return published;
    }
  } else {
    std::vector<char> published;
    absl::Status status = StoreCall([&] {
      store.wait({key});
      published = store.get(key);
    });
    if (!status.ok()) return status;
    segment.name.assign(published.begin(), published.end());
    fd = shm_open(segment.name.c_str(), O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
      return absl::UnavailableError(absl::StrCat("shm_open ", segment.name, ": ", strerror(errno)));
    }
  }
  segment.base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (segment.base == MAP_FAILED) {
    if (rank == 0) shm_unlink(segment.name.c_str());
    return absl::UnavailableError(absl::StrCat("mmap ", segment.name, ": ", strerror(errno)));
  }
  return segment;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShmAllReduce>> ShmAllReduce::Create(
    gloo::rendezvous::Store& store, const std::string& key, int rank, int size,
    std::chrono::milliseconds timeout) {
  const size_t bytes = SegmentBytes(size);
  absl::StatusOr<Segment> segment = MapSegment(store, absl::StrCat(key, "/name"), rank, bytes);
  if (!segment.ok()) return segment.status();
  std::unique_ptr<ShmAllReduce> shm(new ShmAllReduce(segment->base, bytes, rank, size, timeout));
  // Everyone has it mapped once all arrive; then the name can go.
  absl::Status all_mapped = shm->Barrier();
  if (rank == 0) shm_unlink(segment->name.c_str());
  if (!all_mapped.ok()) {
    return absl::Status(all_mapped.code(), absl::StrCat("not every rank mapped the shared "
                                                        "memory: ",
                                                        all_mapped.message()));
  }
  if (absl::Status s = shm->WatchPeers(store, absl::StrCat(key, "/pid")); !s.ok()) return s;
  return shm;
}

absl::StatusOr<float*> ShmAllReduce::MapBuffers(gloo::rendezvous::Store& store,
                                                const std::string& key, size_t n) {
  if (buffers_ != nullptr) return absl::FailedPreconditionError("buffers are already mapped");
  const size_t bytes = std::max<size_t>(1, n * size_) * sizeof(float);
  absl::StatusOr<Segment> segment = MapSegment(store, key, rank_, bytes);
  if (!segment.ok()) return segment.status();
  absl::Status all_mapped = Barrier();
  if (rank_ == 0) shm_unlink(segment->name.c_str());
  if (!all_mapped.ok()) {
    munmap(segment->base, bytes);
    return absl::Status(all_mapped.code(), absl::StrCat("not every rank mapped the shared "
                                                        "buffers: ",
                                                        all_mapped.message()));
  }
  buffers_ = static_cast<float*>(segment->base);
  buffer_floats_ = n;
  return Buffer(rank_);
}

absl::Status ShmAllReduce::ReduceInBuffers(size_t offset, size_t n, ShareReduce across) {
  // Once every rank has arrived, every rank's values are final; each rank
  // then sums its share of the range over all buffers (in rank order, so
  // every rank sees the same bits) and writes the sum into every buffer.
  RETURN_IF_ERROR(Barrier());
  const size_t share = (n + size_ - 1) / size_;
  const size_t begin = offset + std::min(n, share * rank_);
  const size_t end = offset + std::min(n, share * rank_ + share);
  float* sum = Buffer(0);
  for (int r = 1; r < size_; ++r) {
    const float* in = Buffer(r);
    for (size_t i = begin; i < end; ++i) sum[i] += in[i];
  }
  RETURN_IF_ERROR(across(sum + begin, end - begin));
  for (int r = 1; r < size_; ++r) {
    std::memcpy(Buffer(r) + begin, sum + begin, (end - begin) * sizeof(float));
  }
  // Nobody reads another rank's buffer until every share is written.
  return Barrier();
}

ShmAllReduce::ShmAllReduce(void* base, size_t bytes, int rank, int size,
                           std::chrono::milliseconds timeout)
    : base_(base),
      bytes_(bytes),
      header_(static_cast<Header*>(base)),
      rank_(rank),
      size_(size),
      timeout_(timeout) {}

ShmAllReduce::~ShmAllReduce() {
  // Peers waiting for this rank learn at once that it will not come.
  int32_t none = 0;
  header_->departed.compare_exchange_strong(none, rank_ + 1);
  header_->generation.fetch_add(0, std::memory_order_seq_cst);
  Futex(&header_->generation, FUTEX_WAKE, INT_MAX, nullptr);
  for (const auto& [rank, fd] : peer_pidfds_) close(fd);
  munmap(base_, bytes_);
  if (buffers_ != nullptr) {
    munmap(buffers_, std::max<size_t>(1, buffer_floats_ * size_) * sizeof(float));
  }
}

float* ShmAllReduce::Slot(int set, int rank) const {
  return reinterpret_cast<float*>(static_cast<char*>(base_) + kHeaderBytes) +
         (static_cast<size_t>(set) * (size_ + 1) + rank) * kChunkFloats;
}

float* ShmAllReduce::Result(int set) const { return Slot(set, size_); }

absl::Status ShmAllReduce::WatchPeers(gloo::rendezvous::Store& store, const std::string& key) {
  const pid_t self = getpid();
  absl::StatusOr<std::vector<std::string>> pids =
      GatherFromAll(store, key, rank_, size_, std::to_string(self));
  if (!pids.ok()) return pids.status();
  for (int r = 0; r < size_; ++r) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi((*pids)[r], &pid)) {
      return absl::UnavailableError(
          absl::StrCat("rendezvous store: rank ", r, " published no pid: \"", (*pids)[r], "\""));
    }
    if (r == rank_ || pid == self) continue;
    // Every peer is alive here: it published its pid and mapped the segment.
    const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (fd >= 0) peer_pidfds_.push_back({r, fd});
  }
  return absl::OkStatus();
}

absl::Status ShmAllReduce::PeersGone() const {
  if (const int32_t departed = header_->departed.load(std::memory_order_acquire); departed) {
    return absl::AbortedError(
        absl::StrCat("shared-memory all-reduce: peer rank ", departed - 1, " has left"));
  }
  // A pidfd becomes readable when its process ends, killed or not.
  for (const auto& [rank, fd] : peer_pidfds_) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 0) == 1) {
      return absl::AbortedError(
          absl::StrCat("shared-memory all-reduce: the process of peer rank ", rank, " ended"));
    }
  }
  return absl::OkStatus();
}

absl::Status ShmAllReduce::Barrier() {
  const uint32_t generation = header_->generation.load(std::memory_order_acquire);
  if (header_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 ==
      static_cast<uint32_t>(size_)) {
    header_->arrived.store(0, std::memory_order_relaxed);
    header_->generation.fetch_add(1, std::memory_order_release);
    Futex(&header_->generation, FUTEX_WAKE, INT_MAX, nullptr);
    return absl::OkStatus();
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (int spin = 0; header_->generation.load(std::memory_order_acquire) == generation; ++spin) {
    if (spin < 200) continue;  // a short spin: the peer is often just behind
    // Waits are sliced so a peer that is gone is noticed within a slice.
    // One that left after the last arrival released this barrier is no
    // error: the generation moved.
    if (absl::Status gone = PeersGone(); !gone.ok()) {
      if (header_->generation.load(std::memory_order_acquire) != generation) break;
      return gone;
    }
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds::zero()) {
      return absl::DeadlineExceededError(
          absl::StrCat("shared-memory all-reduce: a peer did not arrive within ",
                       std::chrono::duration_cast<std::chrono::seconds>(timeout_).count(), " s"));
    }
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::min<std::chrono::nanoseconds>(left, std::chrono::milliseconds(100)));
    timespec wait{static_cast<time_t>(ns.count() / 1000000000),
                  static_cast<long>(ns.count() % 1000000000)};
    Futex(&header_->generation, FUTEX_WAIT, generation, &wait);
  }
  return absl::OkStatus();
}

absl::Status ShmAllReduce::AllReduceSum(float* data, size_t n) {
  return AllReduceSum(data, n, [](float*, size_t) { return absl::OkStatus(); });
}

absl::Status ShmAllReduce::AllReduceSum(float* data, size_t n, ShareReduce across) {
  float* mine = buffer();
  if (mine != nullptr && data >= mine && data + n <= mine + buffer_floats_) {
    return ReduceInBuffers(static_cast<size_t>(data - mine), n, across);
  }
  // Chunks alternate between two sets of buffers. A rank copies chunk k's
  // result out before it copies chunk k+1 in and reaches that chunk's first
  // barrier; so once that barrier passes, every rank is done with chunk
  // k's set, which chunk k+2 (or the next call) may then overwrite. Two
  // barriers per chunk suffice.
  int set = 0;
  for (size_t start = 0; start < n; start += kChunkFloats, set ^= 1) {
    const size_t count = std::min(kChunkFloats, n - start);
    std::memcpy(Slot(set, rank_), data + start, count * sizeof(float));
    RETURN_IF_ERROR(Barrier());
    // This rank's share of the chunk, summed over every rank's slot in rank
    // order, so every rank gets bit-identical sums.
    const size_t share = (count + size_ - 1) / size_;
    const size_t begin = std::min(count, share * rank_);
    const size_t end = std::min(count, begin + share);
    float* out = Result(set);
    std::memcpy(out + begin, Slot(set, 0) + begin, (end - begin) * sizeof(float));
    for (int r = 1; r < size_; ++r) {
      const float* in = Slot(set, r);
      for (size_t i = begin; i < end; ++i) out[i] += in[i];
    }
    RETURN_IF_ERROR(across(out + begin, end - begin));
    RETURN_IF_ERROR(Barrier());
    std::memcpy(data + start, out, count * sizeof(float));
  }
  return absl::OkStatus();
}

}  // namespace ringmaster
