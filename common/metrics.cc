#include "common/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace ringmaster::metrics {
namespace {

void AppendLabels(std::string* out, const Labels& labels, const std::string& extra_key = "",
                  const std::string& extra_value = "") {
  if (labels.empty() && extra_key.empty()) return;
  out->push_back('{');
  bool first = true;
  for (const auto& [k, v] : labels) {
    absl::StrAppend(out, first ? "" : ",", k, "=\"", EscapeLabelValue(v), "\"");
    first = false;
  }
  if (!extra_key.empty()) {
    absl::StrAppend(out, first ? "" : ",", extra_key, "=\"", extra_value, "\"");
  }
  out->push_back('}');
}

void AppendSample(std::string* out, const std::string& name, const Labels& labels, double value,
                  const std::string& extra_key = "", const std::string& extra_value = "") {
  out->append(name);
  AppendLabels(out, labels, extra_key, extra_value);
  absl::StrAppend(out, " ", FormatValue(value), "\n");
}

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(const std::string& help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // The shortest form that reads back as the same double.
  char buffer[32];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

Histogram::Histogram(BucketBoundaries bounds)
    : bounds_(std::move(bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value) {
  // The first bound >= value; le is inclusive.
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.Add(value);
}

Histogram::Snapshot Histogram::Collect() const {
  Snapshot s;
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(running);
  }
  s.sum = sum_.Get();
  return s;
}

Histogram::BucketBoundaries Histogram::ExponentialBuckets(double start, double factor, int count) {
  BucketBoundaries b;
  for (int i = 0; i < count; ++i, start *= factor) b.push_back(start);
  return b;
}

template <typename T>
Family<T>& Registry::Add(MetricType type, const std::string& name, const std::string& help,
                         const Labels& constant) {
  MutexLock lock(&mu_);
  auto it = families_.find(name);
  if (it != families_.end()) {
    if (it->second.type != type) {
      std::fprintf(stderr, "metric %s registered as %s and %s\n", name.c_str(),
                   TypeName(it->second.type), TypeName(type));
      std::abort();
    }
    return *std::static_pointer_cast<Family<T>>(it->second.family);
  }
  auto family = std::make_shared<Family<T>>(name, help, constant);
  families_[name] = Entry{type, family};
  return *family;
}

Family<Counter>& Registry::AddCounter(const std::string& name, const std::string& help,
                                      const Labels& constant) {
  return Add<Counter>(MetricType::kCounter, name, help, constant);
}

Family<Gauge>& Registry::AddGauge(const std::string& name, const std::string& help,
                                  const Labels& constant) {
  return Add<Gauge>(MetricType::kGauge, name, help, constant);
}

Family<Histogram>& Registry::AddHistogram(const std::string& name, const std::string& help,
                                          const Labels& constant) {
  return Add<Histogram>(MetricType::kHistogram, name, help, constant);
}

void Registry::AddCollectCallback(std::function<void()> callback) {
  MutexLock lock(&mu_);
  callbacks_.push_back(std::move(callback));
}

std::string Registry::Serialize() const {
  std::vector<std::function<void()>> callbacks;
  {
    MutexLock lock(&mu_);
    callbacks = callbacks_;
  }
  for (const auto& callback : callbacks) callback();
  std::string out;
  MutexLock lock(&mu_);
  for (const auto& family : families_) {
    // Named, not structured bindings: lambdas below capture them (C++17).
    const std::string& name = family.first;
    const auto& entry = family.second;
    switch (entry.type) {
      case MetricType::kCounter: {
        auto& f = *std::static_pointer_cast<Family<Counter>>(entry.family);
        absl::StrAppend(&out, "# HELP ", name, " ", EscapeHelp(f.help()), "\n# TYPE ", name,
                        " counter\n");
        f.ForEach(
            [&](const Labels& l, const Counter& c) { AppendSample(&out, name, l, c.Value()); });
        break;
      }
      case MetricType::kGauge: {
        auto& f = *std::static_pointer_cast<Family<Gauge>>(entry.family);
        absl::StrAppend(&out, "# HELP ", name, " ", EscapeHelp(f.help()), "\n# TYPE ", name,
                        " gauge\n");
        f.ForEach([&](const Labels& l, const Gauge& g) { AppendSample(&out, name, l, g.Value()); });
        break;
      }
      case MetricType::kHistogram: {
        auto& f = *std::static_pointer_cast<Family<Histogram>>(entry.family);
        absl::StrAppend(&out, "# HELP ", name, " ", EscapeHelp(f.help()), "\n# TYPE ", name,
                        " histogram\n");
        f.ForEach([&](const Labels& l, const Histogram& h) {
          const Histogram::Snapshot s = h.Collect();
          for (size_t i = 0; i < h.bounds().size(); ++i) {
            AppendSample(&out, name + "_bucket", l, static_cast<double>(s.cumulative[i]), "le",
                         FormatValue(h.bounds()[i]));
          }
          AppendSample(&out, name + "_bucket", l, static_cast<double>(s.cumulative.back()), "le",
                       "+Inf");
          AppendSample(&out, name + "_sum", l, s.sum);
          AppendSample(&out, name + "_count", l, static_cast<double>(s.cumulative.back()));
        });
        break;
      }
    }
  }
  return out;
}

template <>
Family<Counter>& Builder<Counter>::Register(Registry& registry) {
  return registry.AddCounter(name_, help_, labels_);
}
template <>
Family<Gauge>& Builder<Gauge>::Register(Registry& registry) {
  return registry.AddGauge(name_, help_, labels_);
}
template <>
Family<Histogram>& Builder<Histogram>::Register(Registry& registry) {
  return registry.AddHistogram(name_, help_, labels_);
}

}  // namespace ringmaster::metrics
