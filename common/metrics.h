// Prometheus metrics: counters, gauges and histograms with labels, in a
// registry rendered in the text exposition format. The API follows
// prometheus-cpp (Registry, Family, Counter, Gauge, Histogram, BuildCounter
// ...) so that library can replace this one where it is packaged.
//
// Threading: everything is thread-safe. Family::Add takes the family's
// mutex and allocates on the first use of a label set; the returned metric
// stays valid until its series is removed (Remove, RemoveMatching) and its
// updates are lock-free atomics, so hot paths keep the reference and never
// lock. Whoever removes series must know that nobody holds them.
#ifndef RINGMASTER_COMMON_METRICS_H_
#define RINGMASTER_COMMON_METRICS_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"

namespace ringmaster::metrics {

using Labels = std::map<std::string, std::string>;

// A double updated with compare-and-swap (C++17 has no atomic fetch_add
// for floating point).
class AtomicDouble {
 public:
  void Add(double delta) {
    double current = value_.load(std::memory_order_relaxed);
    while (!value_.compare_exchange_weak(current, current + delta, std::memory_order_relaxed)) {
    }
  }
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  double Get() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Counter {
 public:
  // `delta` must be >= 0; counters only go up.
  void Increment(double delta = 1.0) {
    if (delta > 0) value_.Add(delta);
  }
  double Value() const { return value_.Get(); }

 private:
  AtomicDouble value_;
};

class Gauge {
 public:
  void Set(double v) { value_.Set(v); }
  void Increment(double delta = 1.0) { value_.Add(delta); }
  void Decrement(double delta = 1.0) { value_.Add(-delta); }
  double Value() const { return value_.Get(); }

 private:
  AtomicDouble value_;
};

class Histogram {
 public:
  using BucketBoundaries = std::vector<double>;
  // Upper bounds, ascending; +Inf is implied.
  explicit Histogram(BucketBoundaries bounds);
  void Observe(double value);

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // per bound, then +Inf
    double sum = 0;
  };
  Snapshot Collect() const;
  const BucketBoundaries& bounds() const { return bounds_; }

  // Exponential bounds: start, start*factor, ... (count of them).
  static BucketBoundaries ExponentialBuckets(double start, double factor, int count);

 private:
  const BucketBoundaries bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // per bound, then +Inf
  AtomicDouble sum_;
};

enum class MetricType { kCounter, kGauge, kHistogram };

// The metrics of one name, one per label set.
template <typename T>
class Family {
 public:
  Family(std::string name, std::string help, Labels constant_labels)
      : name_(std::move(name)), help_(std::move(help)), constant_(std::move(constant_labels)) {}

  // The metric for `labels`, created on first use.
  template <typename... Args>
  T& Add(const Labels& labels, Args&&... args) {
    MutexLock lock(&mu_);
    auto& slot = metrics_[labels];
    if (slot == nullptr) slot = std::make_unique<T>(std::forward<Args>(args)...);
    return *slot;
  }
  // Forgets the series (for example a job that is gone).
  void Remove(const Labels& labels) {
    MutexLock lock(&mu_);
    metrics_.erase(labels);
  }
  // Forgets every series whose labels include all of `subset`.
  void RemoveMatching(const Labels& subset) {
    MutexLock lock(&mu_);
    for (auto it = metrics_.begin(); it != metrics_.end();) {
      const Labels& labels = it->first;
      const bool match = std::all_of(subset.begin(), subset.end(), [&](const auto& kv) {
        auto found = labels.find(kv.first);
        return found != labels.end() && found->second == kv.second;
      });
      it = match ? metrics_.erase(it) : std::next(it);
    }
  }

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  // Calls `f(labels, metric)` for every series, under the family's mutex.
  void ForEach(const std::function<void(const Labels&, const T&)>& f) const {
    MutexLock lock(&mu_);
    for (const auto& [labels, metric] : metrics_) {
      Labels all = constant_;
      all.insert(labels.begin(), labels.end());
      f(all, *metric);
    }
  }

 private:
  const std::string name_;
  const std::string help_;
  const Labels constant_;
  mutable Mutex mu_;
  std::map<Labels, std::unique_ptr<T>> metrics_ ABSL_GUARDED_BY(mu_);
};

class Registry {
 public:
  // The family named `name`; a second registration of the same name and
  // type returns the first family. Registering one name with two types is a
  // programming error and aborts.
  Family<Counter>& AddCounter(const std::string& name, const std::string& help,
                              const Labels& constant = {});
  Family<Gauge>& AddGauge(const std::string& name, const std::string& help,
                          const Labels& constant = {});
  Family<Histogram>& AddHistogram(const std::string& name, const std::string& help,
                                  const Labels& constant = {});

  // Runs before every scrape (for values computed on demand).
  void AddCollectCallback(std::function<void()> callback);

  // The text exposition format (version 0.0.4), families in name order.
  std::string Serialize() const;

 private:
  struct Entry {
    MetricType type;
    std::shared_ptr<void> family;
  };
  template <typename T>
  Family<T>& Add(MetricType type, const std::string& name, const std::string& help,
                 const Labels& constant);

  mutable Mutex mu_;
  std::map<std::string, Entry> families_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> callbacks_ ABSL_GUARDED_BY(mu_);
};

// prometheus-cpp style builders:
//   auto& steps = BuildCounter().Name("x_total").Help("...").Register(registry);
template <typename T>
class Builder {
 public:
  Builder& Name(std::string name) {
    name_ = std::move(name);
    return *this;
  }
  Builder& Help(std::string help) {
    help_ = std::move(help);
    return *this;
  }
  Builder& Labels(metrics::Labels labels) {
    labels_ = std::move(labels);
    return *this;
  }
  Family<T>& Register(Registry& registry);

 private:
  std::string name_, help_;
  metrics::Labels labels_;
};

inline Builder<Counter> BuildCounter() { return {}; }
inline Builder<Gauge> BuildGauge() { return {}; }
inline Builder<Histogram> BuildHistogram() { return {}; }

// Exposition-format escaping, exposed for tests.
std::string EscapeLabelValue(const std::string& value);
std::string EscapeHelp(const std::string& help);
std::string FormatValue(double value);

}  // namespace ringmaster::metrics

#endif  // RINGMASTER_COMMON_METRICS_H_
