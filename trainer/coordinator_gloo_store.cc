#include "trainer/coordinator_gloo_store.h"

#include <gloo/common/error.h>

#include "absl/strings/str_cat.h"

namespace ringmaster {

void CoordinatorGlooStore::set(const std::string& key, const std::vector<char>& data) {
  absl::Status s = client_->Set(key, std::string(data.begin(), data.end()));
  if (!s.ok()) throw gloo::IoException(absl::StrCat("rendezvous set ", key, ": ", s.ToString()));
}

std::vector<char> CoordinatorGlooStore::get(const std::string& key) {
  // Gloo's get blocks until the key exists.
  wait({key}, timeout_);
  absl::StatusOr<std::string> value = client_->Get(key);
  if (!value.ok()) {
    throw gloo::IoException(absl::StrCat("rendezvous get ", key, ": ", value.status().ToString()));
  }
  return std::vector<char>(value->begin(), value->end());
}

void CoordinatorGlooStore::wait(const std::vector<std::string>& keys,
                                const std::chrono::milliseconds& timeout) {
  absl::Status s = client_->Wait(keys, absl::FromChrono(timeout));
  if (!s.ok()) throw gloo::IoException(absl::StrCat("rendezvous wait: ", s.ToString()));
}

}  // namespace ringmaster
