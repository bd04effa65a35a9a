#include "common/server_reflection_v1.h"

#include <algorithm>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "common/grpc_handoff.h"

namespace ringmaster {
namespace {

namespace rv1 = grpc::reflection::v1;
using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;

// Serves one stream: each request is answered before the next is read.
class ReflectionReactor final
    : public grpc::ServerBidiReactor<rv1::ServerReflectionRequest, rv1::ServerReflectionResponse> {
 public:
  explicit ReflectionReactor(const ServerReflectionV1* service) : service_(service) {
    HandToGrpc(this);
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    GrpcCallback callback(this);
    if (!ok) {  // the client is done
      HandToGrpc(this);
      Finish(grpc::Status::OK);
      return;
    }
    response_ = service_->Answer(request_, &sent_);
    HandToGrpc(this);
    StartWrite(&response_);
  }
  void OnWriteDone(bool ok) override {
    GrpcCallback callback(this);
    HandToGrpc(this);
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the client went away"));
      return;
    }
    StartRead(&request_);
  }
  void OnDone() override {
    BackFromGrpc(this);
    delete this;
  }

 private:
  const ServerReflectionV1* const service_;
  rv1::ServerReflectionRequest request_;
  rv1::ServerReflectionResponse response_;
  std::vector<std::string> sent_;  // files already sent on this stream
};

void Error(rv1::ServerReflectionResponse* response, grpc::StatusCode code,
           const std::string& message) {
  response->mutable_error_response()->set_error_code(code);
  response->mutable_error_response()->set_error_message(message);
}

// `file` and its imports, each once per stream, the file first.
void AddFiles(const FileDescriptor* file, std::vector<std::string>* sent,
              rv1::FileDescriptorResponse* out) {
  if (std::find(sent->begin(), sent->end(), file->name()) != sent->end()) return;
  sent->push_back(file->name());
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  out->add_file_descriptor_proto(proto.SerializeAsString());
  for (int i = 0; i < file->dependency_count(); ++i) AddFiles(file->dependency(i), sent, out);
}

}  // namespace

grpc::ServerBidiReactor<rv1::ServerReflectionRequest, rv1::ServerReflectionResponse>*
ServerReflectionV1::ServerReflectionInfo(grpc::CallbackServerContext*) {
  return new ReflectionReactor(this);
}

rv1::ServerReflectionResponse ServerReflectionV1::Answer(
    const rv1::ServerReflectionRequest& request, std::vector<std::string>* sent) const {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  rv1::ServerReflectionResponse response;
  response.set_valid_host(request.host());
  *response.mutable_original_request() = request;
  const FileDescriptor* file = nullptr;
  std::string missing;
  switch (request.message_request_case()) {
    case rv1::ServerReflectionRequest::kListServices:
      for (const std::string& name : services_) {
        response.mutable_list_services_response()->add_service()->set_name(name);
      }
      return response;
    case rv1::ServerReflectionRequest::kFileByFilename:
      file = pool->FindFileByName(request.file_by_filename());
      missing = absl::StrCat("no file ", request.file_by_filename());
      break;
    case rv1::ServerReflectionRequest::kFileContainingSymbol:
      file = pool->FindFileContainingSymbol(request.file_containing_symbol());
      missing = absl::StrCat("no symbol ", request.file_containing_symbol());
      break;
    case rv1::ServerReflectionRequest::kFileContainingExtension: {
      const auto& ask = request.file_containing_extension();
      const google::protobuf::Descriptor* type = pool->FindMessageTypeByName(ask.containing_type());
      const google::protobuf::FieldDescriptor* extension =
          type == nullptr ? nullptr : pool->FindExtensionByNumber(type, ask.extension_number());
      if (extension != nullptr) file = extension->file();
      missing =
          absl::StrCat("no extension ", ask.extension_number(), " of ", ask.containing_type());
      break;
    }
    case rv1::ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const std::string& name = request.all_extension_numbers_of_type();
      const google::protobuf::Descriptor* type = pool->FindMessageTypeByName(name);
      if (type == nullptr) {
        Error(&response, grpc::StatusCode::NOT_FOUND, absl::StrCat("no type ", name));
        return response;
      }
      std::vector<const google::protobuf::FieldDescriptor*> extensions;
      pool->FindAllExtensions(type, &extensions);
      auto* numbers = response.mutable_all_extension_numbers_response();
      numbers->set_base_type_name(name);
      for (const auto* e : extensions) numbers->add_extension_number(e->number());
      return response;
    }
    default:
      Error(&response, grpc::StatusCode::UNIMPLEMENTED, "an unknown reflection request");
      return response;
  }
  if (file == nullptr) {
    Error(&response, grpc::StatusCode::NOT_FOUND, missing);
    return response;
  }
  AddFiles(file, sent, response.mutable_file_descriptor_response());
  return response;
}

ServerTooling::ServerTooling(std::vector<std::string> services)
    : services_([&] {
        services.push_back("grpc.health.v1.Health");
        services.push_back("grpc.reflection.v1alpha.ServerReflection");
        services.push_back("grpc.reflection.v1.ServerReflection");
        return services;
      }()),
      reflection_v1_(services_) {}

void ServerTooling::AddTo(grpc::ServerBuilder& builder) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  builder.RegisterService(&reflection_v1_);
}

void ServerTooling::Serving(grpc::Server* server, bool serving) const {
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus(serving);
  for (const std::string& name : services_) health->SetServingStatus(name, serving);
}

}  // namespace ringmaster
