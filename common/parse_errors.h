// A gRPC server interceptor that names a request that did not parse. gRPC's
// callback API ends such a call with UNIMPLEMENTED and no message, which
// reads as "no such method"; this turns it into INVALID_ARGUMENT "cannot
// parse <request message>" for the methods of the services the server
// serves (a method it does not serve stays UNIMPLEMENTED).
#ifndef RINGMASTER_COMMON_PARSE_ERRORS_H_
#define RINGMASTER_COMMON_PARSE_ERRORS_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/support/server_interceptor.h>

namespace ringmaster {

// Add with grpc::ServerBuilder::experimental().SetInterceptorCreators;
// `services` are the full names of the services the server serves
// ("ringmaster.v1.JobService").
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> ParseErrorInterceptor(
    std::vector<std::string> services);

// The request message of a method path ("/ringmaster.v1.JobService/GetJob"
// -> "GetJobRequest"); empty for a method not in the generated protos.
std::string RequestMessageOf(const std::string& method_path);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_PARSE_ERRORS_H_
