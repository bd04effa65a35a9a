#include "trainer/gloo_collective.h"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include "absl/strings/str_cat.h"
#include "trainer/catch_status.h"

namespace ringmaster {
namespace {

template <typename F>
absl::Status GlooCall(const char* what, F body) {
  return CatchAsStatus(absl::StrCat("gloo ", what), body);
}

void SumBf16(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<uint16_t*>(out);
  auto* x = static_cast<const uint16_t*>(a);
  auto* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = FloatToBf16(Bf16ToFloat(x[i]) + Bf16ToFloat(y[i]));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GlooCollective>> GlooCollective::Connect(
    gloo::rendezvous::Store& store, int rank, int size, const GlooOptions& options) {
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(options.timeout);
  absl::Status status = GlooCall("rendezvous", [&] {
    gloo::transport::tcp::attr attr(options.hostname.c_str());
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::PrefixStore prefixed(options.prefix, store);
    context->connectFullMesh(prefixed, device);
  });
  if (!status.ok()) return status;
  std::unique_ptr<GlooCollective> collective(new GlooCollective(context, options.timeout));
  collective->store_ = &store;
  collective->prefix_ = options.prefix;
  collective->hostname_ = options.hostname;
  if (options.shared_memory && size > 1) {
    gloo::rendezvous::PrefixStore prefixed(options.prefix, store);
    absl::StatusOr<HostLayout> layout =
        ExchangeHostLayout(prefixed, "host", rank, size,
                           options.host_identity.empty() ? HostIdentity() : options.host_identity);
    if (!layout.ok()) return layout.status();
    collective->layout_ = *layout;
    if (absl::Status s = collective->ConnectHierarchy(prefixed); !s.ok()) return s;
  }
  return collective;
}

absl::Status GlooCollective::ConnectHierarchy(gloo::rendezvous::Store& store) {
  const HostLayout& layout = layout_;
  if (layout.uniform && layout.local_size > 1) {
    absl::StatusOr<std::unique_ptr<ShmAllReduce>> shm = ShmAllReduce::Create(
        store, absl::StrCat("shm/", layout.host), layout.local_rank, layout.local_size, timeout_);
    if (!shm.ok()) return shm.status();
    shm_ = *std::move(shm);
  }
  if (layout.hosts == 1) return absl::OkStatus();
  // The ring: local rank i of every host (shares cannot line up across
  // hosts of different sizes: then every rank).
  absl::StatusOr<std::unique_ptr<RingAllReduce>> ring =
      RingAllReduce::Connect(store, absl::StrCat("ring/", layout.uniform ? layout.local_rank : 0),
                             layout.uniform ? layout.host : rank(),
                             layout.uniform ? layout.hosts : size(), hostname_, timeout_);
  if (!ring.ok()) return ring.status();
  across_ = *std::move(ring);
  return absl::OkStatus();
}

std::string GlooCollective::transport() const {
  const HostLayout& l = layout_;
  if (!l.uniform) {
    return absl::StrCat("a tcp ring over all ranks (", l.hosts,
                        " hosts with different numbers of ranks)");
  }
  if (l.hosts > 1 && l.local_size > 1) {
    return absl::StrCat("shared memory within each of ", l.hosts, " hosts (", l.local_size,
                        " ranks each) and ", l.local_size, " tcp rings between them");
  }
  if (l.hosts > 1) return absl::StrCat("a tcp ring over ", l.hosts, " hosts");
  return shm_ ? "shared memory" : "tcp";
}

absl::Status GlooCollective::AllReduceSum(float* data, size_t n) {
  if (size() == 1 || n == 0) return absl::OkStatus();
  if (shm_ && across_) {
    return shm_->AllReduceSum(data, n, [this](float* share, size_t count) {
      return across_->AllReduceSum(share, count);
    });
  }
  if (shm_) return shm_->AllReduceSum(data, n);
  if (across_) return across_->AllReduceSum(data, n);
  return GlooCall("allreduce", [&] {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data, n);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTag(next_tag_++);
    opts.setTimeout(timeout_);
    gloo::allreduce(opts);
  });
}

float* GlooCollective::SharedBuffer(size_t n) {
  if (!shm_) return nullptr;
  gloo::rendezvous::PrefixStore prefixed(prefix_, *store_);
  absl::StatusOr<float*> buffer =
      shm_->MapBuffers(prefixed, absl::StrCat("shared-buffer/", layout_.host), n);
  return buffer.ok() ? *buffer : nullptr;
}

absl::Status GlooCollective::AllReduceSumBf16(uint16_t* data, size_t n) {
  if (size() == 1 || n == 0) return absl::OkStatus();
  return GlooCall("allreduce (bf16)", [&] {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data, n);
    opts.setReduceFunction(&SumBf16);
    opts.setTag(next_tag_++);
    opts.setTimeout(timeout_);
    gloo::allreduce(opts);
  });
}

absl::Status GlooCollective::Broadcast(void* data, size_t bytes, int root) {
  if (size() == 1 || bytes == 0) return absl::OkStatus();
  return GlooCall("broadcast", [&] {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<uint8_t*>(data), bytes);
    opts.setRoot(root);
    opts.setTag(next_tag_++);
    opts.setTimeout(timeout_);
    gloo::broadcast(opts);
  });
}

absl::Status GlooCollective::Barrier() {
  if (size() == 1) return absl::OkStatus();
  return GlooCall("barrier", [&] {
    gloo::BarrierOptions opts(context_);
    opts.setTag(next_tag_++);
    opts.setTimeout(timeout_);
    gloo::barrier(opts);
  });
}

}  // namespace ringmaster
