#include "domain/rendezvous_client.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "common/credentials.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"

namespace ringmaster {

RendezvousClient::RendezvousClient(const std::string& address, std::string job_id, int attempt,
                                   const std::string& token, const Tls& tls)
    : token_(token), targets_(address, tls) {
  scope_.set_job_id(std::move(job_id));
  scope_.set_attempt(attempt);
}

absl::StatusOr<std::unique_ptr<RendezvousClient>> RendezvousClient::FromEnvironment() {
  const char* address = std::getenv("RINGMASTER_COORDINATOR");
  const char* job = std::getenv("RINGMASTER_JOB_ID");
  const char* attempt = std::getenv("TORCHELASTIC_RESTART_COUNT");
  int attempt_number = 0;
  if (address == nullptr || job == nullptr || attempt == nullptr ||
      !absl::SimpleAtoi(attempt, &attempt_number)) {
    return absl::FailedPreconditionError(
        "RINGMASTER_COORDINATOR, RINGMASTER_JOB_ID and TORCHELASTIC_RESTART_COUNT "
        "must be set (as they are for a rank started by a Ringmaster worker)");
  }
  const char* token = std::getenv("RINGMASTER_JOB_TOKEN");
  const char* ca = std::getenv("RINGMASTER_TLS_CA");
  return std::make_unique<RendezvousClient>(address, job, attempt_number, token ? token : "",
                                            CaOnly(ca ? ca : ""));
}

void RendezvousClient::Prepare(grpc::ClientContext* context, absl::Duration timeout) const {
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  // One coordinator: wait through its restart. Several: try the others.
  context->set_wait_for_ready(!targets_.several());
  AddBearerToken(context, token_);
}

absl::Status RendezvousClient::Call(
    absl::Duration timeout,
    const std::function<grpc::Status(v1::RendezvousService::Stub&, grpc::ClientContext*)>& rpc) {
  return FromGrpcStatus(targets_.Call(absl::Now() + timeout, /*idempotent=*/false,
                                      [&](const CoordinatorTargets::Target& target) {
                                        grpc::ClientContext context;
                                        Prepare(&context, timeout);
                                        std::unique_ptr<v1::RendezvousService::Stub> stub =
                                            v1::RendezvousService::NewStub(target.channel);
                                        return rpc(*stub, &context);
                                      }));
}

absl::Status RendezvousClient::Set(const std::string& key, const std::string& value) {
  v1::SetRequest request;
  *request.mutable_scope() = scope_;
  request.set_key(key);
  request.set_value(value);
  v1::SetResponse response;
  return Call(absl::Seconds(30), [&](v1::RendezvousService::Stub& stub, grpc::ClientContext* c) {
    return stub.Set(c, request, &response);
  });
}

absl::StatusOr<std::string> RendezvousClient::Get(const std::string& key) {
  v1::GetRequest request;
  *request.mutable_scope() = scope_;
  request.set_key(key);
  v1::GetResponse response;
  RETURN_IF_ERROR(
      Call(absl::Seconds(30), [&](v1::RendezvousService::Stub& stub, grpc::ClientContext* c) {
        return stub.Get(c, request, &response);
      }));
  return response.value();
}

absl::Status RendezvousClient::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  v1::WaitRequest request;
  *request.mutable_scope() = scope_;
  for (const auto& key : keys) request.add_keys(key);
  request.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  v1::WaitResponse response;
  // The server enforces `timeout`; the RPC deadline only guards against a
  // coordinator that never answers.
  return Call(timeout + absl::Seconds(30),
              [&](v1::RendezvousService::Stub& stub, grpc::ClientContext* c) {
                return stub.Wait(c, request, &response);
              });
}

absl::StatusOr<int64_t> RendezvousClient::Add(const std::string& key, int64_t delta) {
  v1::AddRequest request;
  *request.mutable_scope() = scope_;
  request.set_key(key);
  request.set_delta(delta);
  v1::AddResponse response;
  RETURN_IF_ERROR(
      Call(absl::Seconds(30), [&](v1::RendezvousService::Stub& stub, grpc::ClientContext* c) {
        return stub.Add(c, request, &response);
      }));
  return response.value();
}

}  // namespace ringmaster
