// The collectives a data-parallel rank needs, behind one interface with a
// Gloo (CPU, TCP) and an NCCL (GPU) implementation.
#ifndef RINGMASTER_TRAINER_COLLECTIVE_H_
#define RINGMASTER_TRAINER_COLLECTIVE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace ringmaster {

// Not thread-safe: one thread issues collectives at a time, and every rank
// issues the same collectives in the same order. Pointers are host memory
// for Gloo and device memory for NCCL.
class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "gloo" | "nccl"

  // In-place sum over ranks.
  virtual absl::Status AllReduceSum(float* data, size_t n) = 0;
  // The same on bfloat16 values (the upper halves of floats), summed in
  // float; the compressed form of a gradient bucket.
  virtual absl::Status AllReduceSumBf16(uint16_t* data, size_t n) = 0;
  // Copies `bytes` from `root` to every rank, in place.
  virtual absl::Status Broadcast(void* data, size_t bytes, int root) = 0;
  virtual absl::Status Barrier() = 0;

  // Optional: `n` floats that AllReduceSum reduces in place without copies
  // when its data lies inside them (memory shared by the ranks of one
  // host). Every rank calls it at the same point; null when unsupported.
  virtual float* SharedBuffer(size_t n) { return nullptr; }
};

// bfloat16 <-> float, round to nearest even.
inline uint16_t FloatToBf16(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float Bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &bits, sizeof(f));
  return f;
}

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_COLLECTIVE_H_
