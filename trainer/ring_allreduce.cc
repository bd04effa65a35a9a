#include "trainer/ring_allreduce.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "trainer/catch_status.h"

namespace ringmaster {
namespace {

struct Range {
  size_t begin;
  size_t end;
  size_t size() const { return end - begin; }
};

// Block b of n floats cut into `blocks`.
Range BlockOf(size_t n, int blocks, int b) {
  const size_t share = (n + blocks - 1) / blocks;
  return {std::min(n, share * b), std::min(n, share * (b + 1))};
}

size_t Segments(size_t floats) {
  return (floats + RingAllReduce::kSegmentFloats - 1) / RingAllReduce::kSegmentFloats;
}

void Check(bool completed, const char* what) {
  // Gloo throws on a broken pair or a timeout; false is an abort, which
  // nothing here asks for.
  if (!completed) throw std::runtime_error(absl::StrCat(what, " aborted"));
}

}  // namespace

absl::Status RingAllReduce::AllReduceSum(float* data, size_t n) {
  if (size() == 1 || n == 0) return absl::OkStatus();
  return CatchAsStatus("gloo ring all-reduce", [&] { Run(data, n); });
}

// Step t receives block r-t-1 (mod p) from the previous rank and sends the
// block it received at step t-1 (step 0: block r) to the next. Steps
// 0..p-2 reduce-scatter: each received block is added to this rank's, and
// after them this rank holds the full sum of block r+1. Steps p-1..2p-3
// all-gather: the summed blocks go once round the ring. Each received
// segment is passed on as soon as it is summed (or, gathering, as soon as
// it lands): the steps overlap, and both directions of every link stay busy.
void RingAllReduce::Run(float* data, size_t n) {
  const int p = size();
  const int r = rank();
  const int next = (r + 1) % p;
  const int prev = (r + p - 1) % p;
  const int steps = 2 * (p - 1);
  const auto received_block = [&](int t) { return BlockOf(n, p, (r - t - 1 + 2 * p) % p); };
  const size_t widest = BlockOf(n, p, 0).size();
  if (scratch_.size() < 2 * widest) scratch_.resize(2 * widest);
  const size_t slots_per_step = std::max<size_t>(1, Segments(widest));
  // Segment k of step t travels in slot base + t * slots_per_step + k on
  // both sides, whatever order sends and receives complete in.
  const uint64_t base = lanes_[0]->nextSlot(static_cast<int>(steps * slots_per_step));
  gloo::Context* const out_lane = lanes_[r % 2].get();
  gloo::Context* const in_lane = lanes_[prev % 2].get();
  const auto slot = [&](int t, size_t k) { return base + t * slots_per_step + k; };

  // The TCP transport counts completions per buffer, so one buffer carries
  // every send; each receive has a buffer of its own to wait on.
  auto sends = out_lane->createUnboundBuffer(data, n * sizeof(float));
  size_t sent = 0;
  const auto send = [&](int t, size_t begin, size_t count, size_t k) {
    sends->send(next, slot(t, k), begin * sizeof(float), count * sizeof(float));
    ++sent;
  };
  // Summing steps land in one half of the scratch (alternating, so the next
  // step's receives can be posted while this step's are summed); gathering
  // steps land in place.
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> receives[2];
  const auto post_receives = [&](int t) {
    const Range in = received_block(t);
    auto& posted = receives[t % 2];
    posted.clear();
    for (size_t begin = in.begin, k = 0; begin < in.end; begin += kSegmentFloats, ++k) {
      const size_t count = std::min(kSegmentFloats, in.end - begin);
      float* landing = t < p - 1 ? scratch_.data() + (t % 2) * widest + (begin - in.begin)
                                 : data + begin;
      posted.push_back(in_lane->createUnboundBuffer(landing, count * sizeof(float)));
      posted.back()->recv(prev, slot(t, k));
    }
  };

  post_receives(0);
  const Range first = BlockOf(n, p, r);
  for (size_t begin = first.begin, k = 0; begin < first.end; begin += kSegmentFloats, ++k) {
    send(0, begin, std::min(kSegmentFloats, first.end - begin), k);
  }
  for (int t = 0; t < steps; ++t) {
    if (t + 1 < steps) post_receives(t + 1);
    const Range in = received_block(t);
    auto& posted = receives[t % 2];
    for (size_t k = 0; k < posted.size(); ++k) {
      Check(posted[k]->waitRecv(timeout_), "ring all-reduce receive");
      const size_t begin = in.begin + k * kSegmentFloats;
      const size_t count = std::min(kSegmentFloats, in.end - begin);
      if (t < p - 1) {
        const float* incoming = scratch_.data() + (t % 2) * widest + k * kSegmentFloats;
        float* mine = data + begin;
        for (size_t i = 0; i < count; ++i) mine[i] += incoming[i];
      }
      if (t + 1 < steps) send(t + 1, begin, count, k);
    }
  }
  for (size_t k = 0; k < sent; ++k) Check(sends->waitSend(timeout_), "ring all-reduce send");
}

}  // namespace ringmaster
