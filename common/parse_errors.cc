#include "common/parse_errors.h"

#include <google/protobuf/descriptor.h>

namespace ringmaster {
namespace {

using grpc::experimental::InterceptionHookPoints;

class ParseErrors final : public grpc::experimental::Interceptor {
 public:
  explicit ParseErrors(const char* method) : method_(method) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED &&
          status.error_message().empty()) {
        if (const std::string request = RequestMessageOf(method_); !request.empty()) {
          methods->ModifySendStatus(
              grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "cannot parse " + request));
        }
      }
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new ParseErrors(info->method());
  }
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> ParseErrorInterceptor() {
  return std::make_unique<Factory>();
}

std::string RequestMessageOf(const std::string& method_path) {
  // "/package.Service/Method" -> "package.Service.Method"
  if (method_path.size() < 2 || method_path[0] != '/') return "";
  std::string name = method_path.substr(1);
  const size_t slash = name.find('/');
  if (slash == std::string::npos) return "";
  name[slash] = '.';
  const google::protobuf::MethodDescriptor* method =
      google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(name);
  return method == nullptr ? "" : method->input_type()->name();
}

}  // namespace ringmaster
