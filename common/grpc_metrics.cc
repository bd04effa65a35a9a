#include "common/grpc_metrics.h"

#include <chrono>
#include <string>

namespace ringmaster {
namespace {

using grpc::experimental::InterceptionHookPoints;

class LatencyInterceptor final : public grpc::experimental::Interceptor {
 public:
  LatencyInterceptor(grpc::experimental::ServerRpcInfo* info,
                     metrics::Family<metrics::Histogram>* family)
      : method_(info->method()),
        type_(info->type() == grpc::experimental::ServerRpcInfo::Type::UNARY ? "unary" : "stream"),
        family_(family),
        start_(std::chrono::steady_clock::now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      family_->Add({{"method", method_}, {"type", type_}}, Buckets()).Observe(seconds);
    }
    methods->Proceed();
  }

  static metrics::Histogram::BucketBoundaries Buckets() {
    return metrics::Histogram::ExponentialBuckets(0.0001, 4, 10);
  }

 private:
  const std::string method_;
  const char* const type_;
  metrics::Family<metrics::Histogram>* const family_;
  const std::chrono::steady_clock::time_point start_;
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(metrics::Family<metrics::Histogram>* family) : family_(family) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new LatencyInterceptor(info, family_);
  }

 private:
  metrics::Family<metrics::Histogram>* const family_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> RpcLatencyInterceptor(
    metrics::Registry* registry) {
  return std::make_unique<Factory>(&registry->AddHistogram(
      "ringmaster_rpc_duration_seconds",
      "Time from an RPC's arrival to its status, by method; type is unary or stream (a "
      "stream's is its lifetime)."));
}

}  // namespace ringmaster
