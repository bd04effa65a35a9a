#include "worker/gpu_watch.h"

#include <spdlog/spdlog.h>

namespace ringmaster {

GpuWatch::GpuWatch(Source source, Sinks sinks, const Clock* clock, GpuWatchOptions options)
    : source_(std::move(source)), sinks_(std::move(sinks)), clock_(clock), options_(options) {}

GpuWatch::~GpuWatch() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void GpuWatch::Start() {
  thread_ = std::thread([this] {
    for (;;) {
      {
        MutexLock lock(&mu_);
        if (stopping_) return;
      }
      Poll(absl::Milliseconds(500));
    }
  });
}

void GpuWatch::Poll(absl::Duration wait) {
  if (std::optional<GpuEvent> event = source_.wait_event(wait)) {
    v1::GpuError error;
    error.set_gpu(event->index);
    error.set_uuid(event->uuid);
    if (event->xid != 0) {
      error.set_kind(v1::GPU_ERROR_XID);
      error.set_xid(event->xid);
      sinks_.count_xid(event->index, event->xid);
    } else {
      error.set_kind(v1::GPU_ERROR_ECC_UNCORRECTABLE);
    }
    Report(std::move(error));
  }
  if (clock_->Now() >= next_counters_) {
    next_counters_ = clock_->Now() + options_.counters_every;
    ReadCounters();
  }
}

void GpuWatch::ReadCounters() {
  for (const GpuSample& s : source_.sample()) {
    auto [it, first] = counters_.try_emplace(s.index, -1, -1);
    auto& [ecc, retired] = it->second;
    // Only a rise while the worker watches is news: what the first reading
    // finds is older (ringmaster_gpu_uncorrected_ecc_errors and its alert
    // show it).
    const bool ecc_rose = !first && ecc >= 0 && s.uncorrected_ecc_errors > ecc;
    const bool retired_rose = !first && retired >= 0 && s.retired_pages > retired;
    ecc = s.uncorrected_ecc_errors;
    retired = s.retired_pages;
    for (const auto& [rose, kind, count] :
         {std::tuple{ecc_rose, v1::GPU_ERROR_ECC_UNCORRECTABLE, s.uncorrected_ecc_errors},
          std::tuple{retired_rose, v1::GPU_ERROR_RETIRED_PAGES, s.retired_pages}}) {
      if (!rose) continue;
      v1::GpuError error;
      error.set_gpu(s.index);
      error.set_uuid(s.uuid);
      error.set_kind(kind);
      error.set_count(static_cast<int64_t>(count));
      Report(std::move(error));
    }
  }
}

void GpuWatch::Report(v1::GpuError error) {
  const absl::Time now = clock_->Now();
  error.set_time_unix_ms(absl::ToUnixMillis(now));
  auto [it, added] =
      reported_.try_emplace({error.gpu(), static_cast<int>(error.kind()), error.xid()}, now);
  if (!added && now - it->second < options_.repeat_after) return;
  it->second = now;
  spdlog::warn("GPU {} ({}): {} xid {} count {}", error.gpu(), error.uuid(),
               v1::GpuErrorKind_Name(error.kind()), error.xid(), error.count());
  sinks_.report(error);
}

}  // namespace ringmaster
