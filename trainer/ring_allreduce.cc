#include "trainer/ring_allreduce.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "trainer/catch_status.h"

namespace ringmaster {
namespace {

struct Range {
  size_t begin;
  size_t end;
};

// Block b of n floats cut into `blocks`.
Range BlockOf(size_t n, int blocks, int b) {
  const size_t share = (n + blocks - 1) / blocks;
  return {std::min(n, share * b), std::min(n, share * (b + 1))};
}

void Check(bool completed, const char* what) {
  // Gloo throws on a broken pair or a timeout; false is an abort, which
  // nothing here asks for.
  if (!completed) throw std::runtime_error(absl::StrCat(what, " aborted"));
}

}  // namespace

void RingAllReduce::Step(float* data, size_t n, int send_block, int recv_block, bool sum) {
  const int next = (rank() + 1) % size();
  const int prev = (rank() + size() - 1) % size();
  const Range out = BlockOf(n, size(), send_block);
  const Range in = BlockOf(n, size(), recv_block);
  // Segment k of a step travels in slot base + k on both sides, so the
  // sender's and the receiver's cuts match whatever order they complete in.
  const size_t segments = (std::max(out.end - out.begin, in.end - in.begin) + kSegmentFloats - 1) /
                          kSegmentFloats;
  const uint64_t base = context_->nextSlot(static_cast<int>(std::max<size_t>(1, segments)));
  float* const landing = sum ? scratch_.data() : data + in.begin;

  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> receives;
  for (size_t begin = in.begin, k = 0; begin < in.end; begin += kSegmentFloats, ++k) {
    const size_t count = std::min(kSegmentFloats, in.end - begin);
    receives.push_back(context_->createUnboundBuffer(landing + (begin - in.begin),
                                                     count * sizeof(float)));
    receives.back()->recv(prev, base + k);
  }
  // The TCP transport counts completions per buffer, so one buffer can
  // carry every send of the step.
  auto sends = context_->createUnboundBuffer(data, n * sizeof(float));
  size_t sent = 0;
  for (size_t begin = out.begin, k = 0; begin < out.end; begin += kSegmentFloats, ++k) {
    const size_t count = std::min(kSegmentFloats, out.end - begin);
    sends->send(next, base + k, begin * sizeof(float), count * sizeof(float));
    ++sent;
  }
  for (size_t k = 0; k < receives.size(); ++k) {
    Check(receives[k]->waitRecv(timeout_), "ring all-reduce receive");
    if (!sum) continue;
    const size_t begin = in.begin + k * kSegmentFloats;
    const size_t count = std::min(kSegmentFloats, in.end - begin);
    const float* incoming = landing + k * kSegmentFloats;
    float* mine = data + begin;
    for (size_t i = 0; i < count; ++i) mine[i] += incoming[i];
  }
  for (size_t k = 0; k < sent; ++k) Check(sends->waitSend(timeout_), "ring all-reduce send");
}

absl::Status RingAllReduce::AllReduceSum(float* data, size_t n) {
  const int p = size();
  if (p == 1 || n == 0) return absl::OkStatus();
  const Range widest = BlockOf(n, p, 0);
  if (scratch_.size() < widest.end - widest.begin) scratch_.resize(widest.end - widest.begin);
  return CatchAsStatus("gloo ring all-reduce", [&] {
    const int r = rank();
    // Reduce-scatter: after step s, block r-s-1 holds the sum of s+2 ranks;
    // after p-1 steps this rank holds the full sum of block r+1.
    for (int s = 0; s < p - 1; ++s) {
      Step(data, n, (r - s + p) % p, (r - s - 1 + 2 * p) % p, /*sum=*/true);
    }
    // All-gather: the summed blocks go once round the ring.
    for (int s = 0; s < p - 1; ++s) {
      Step(data, n, (r + 1 - s + p) % p, (r - s + p) % p, /*sum=*/false);
    }
  });
}

}  // namespace ringmaster
