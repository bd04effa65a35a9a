// A gRPC server interceptor that records each RPC's latency in
// ringmaster_rpc_duration_seconds{method}.
#ifndef RINGMASTER_COMMON_GRPC_METRICS_H_
#define RINGMASTER_COMMON_GRPC_METRICS_H_

#include <grpcpp/support/server_interceptor.h>

#include <memory>

#include "common/metrics.h"

namespace ringmaster {

// Add with grpc::ServerBuilder::experimental().SetInterceptorCreators.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> RpcLatencyInterceptor(
    metrics::Registry* registry);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_GRPC_METRICS_H_
