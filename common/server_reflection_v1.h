// grpc.reflection.v1.ServerReflection over the protobuf descriptors linked
// into this binary, beside gRPC's own v1alpha plugin, so that clients that
// ask for either (grpcurl, Postman, grpcui) can list and call our services.
#ifndef RINGMASTER_COMMON_SERVER_REFLECTION_V1_H_
#define RINGMASTER_COMMON_SERVER_REFLECTION_V1_H_

#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "proto/reflection_v1.grpc.pb.h"

namespace ringmaster {

class ServerReflectionV1 final : public grpc::reflection::v1::ServerReflection::CallbackService {
 public:
  // `services`: the full names of the services the server serves.
  explicit ServerReflectionV1(std::vector<std::string> services) : services_(std::move(services)) {}

  grpc::ServerBidiReactor<grpc::reflection::v1::ServerReflectionRequest,
                          grpc::reflection::v1::ServerReflectionResponse>*
  ServerReflectionInfo(grpc::CallbackServerContext* context) override;

  // The answer to one request; `sent` holds the files this stream has
  // already sent, which are not sent again.
  grpc::reflection::v1::ServerReflectionResponse Answer(
      const grpc::reflection::v1::ServerReflectionRequest& request,
      std::vector<std::string>* sent) const;

 private:
  const std::vector<std::string> services_;
};

// The services every Ringmaster server adds to its own for tools: health
// (each of `services` SERVING by its name, and "" for the server) and
// reflection, v1alpha and v1. Call before building the server; Serving
// after it is built.
class ServerTooling {
 public:
  explicit ServerTooling(std::vector<std::string> services);
  void AddTo(grpc::ServerBuilder& builder);
  // Marks the server and each service SERVING (or NOT_SERVING).
  void Serving(grpc::Server* server, bool serving) const;

 private:
  std::vector<std::string> services_;
  ServerReflectionV1 reflection_v1_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_SERVER_REFLECTION_V1_H_
