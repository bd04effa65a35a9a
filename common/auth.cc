#include "common/auth.h"

namespace ringmaster {
namespace {

// Compares without stopping at the first difference, so the time a refusal
// takes says nothing about how much of the token was right.
bool SameSecret(const std::string& a, const std::string& b) {
  unsigned char differ = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) differ |= a[i] ^ b[i % b.size()];
  return differ == 0;
}

}  // namespace

void AddBearerToken(grpc::ClientContext* context, const std::string& token) {
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
}

absl::Status TokenCheck::Check(const grpc::CallbackServerContext* context) const {
  if (token_.empty()) return absl::OkStatus();
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  if (it != metadata.end() &&
      SameSecret(std::string(it->second.data(), it->second.size()), "Bearer " + token_)) {
    return absl::OkStatus();
  }
  return absl::UnauthenticatedError(
      it == metadata.end()
          ? "this coordinator needs a token: pass --token or set RINGMASTER_TOKEN"
          : "wrong token (--token / RINGMASTER_TOKEN)");
}

}  // namespace ringmaster
