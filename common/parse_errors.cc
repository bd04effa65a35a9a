#include "common/parse_errors.h"

#include <algorithm>

#include <google/protobuf/descriptor.h>

namespace ringmaster {
namespace {

using grpc::experimental::InterceptionHookPoints;

class ParseErrors final : public grpc::experimental::Interceptor {
 public:
  explicit ParseErrors(std::string method) : method_(std::move(method)) {}

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
  explicit Factory(std::vector<std::string> services) : services_(std::move(services)) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    const std::string method = info->method();  // "/package.Service/Method"
    const std::string service = method.substr(1, method.rfind('/') - 1);
    if (std::find(services_.begin(), services_.end(), service) == services_.end()) {
      return nullptr;  // not served here: UNIMPLEMENTED is right
    }
    return new ParseErrors(method);
  }

 private:
  const std::vector<std::string> services_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> ParseErrorInterceptor(
    std::vector<std::string> services) {
  return std::make_unique<Factory>(std::move(services));
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
