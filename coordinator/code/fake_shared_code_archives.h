// SharedCodeArchives in memory, which tests can make fail as an
// unreachable database would.
#ifndef RINGMASTER_COORDINATOR_CODE_FAKE_SHARED_CODE_ARCHIVES_H_
#define RINGMASTER_COORDINATOR_CODE_FAKE_SHARED_CODE_ARCHIVES_H_

#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "coordinator/code/code_store.h"

namespace ringmaster {

class FakeSharedCodeArchives final : public SharedCodeArchives {
 public:
  absl::Status Put(const std::string& sha256, const std::string& path, int64_t bytes) override {
    std::ifstream in(path, std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(down_);
    if (static_cast<int64_t>(data.size()) != bytes) {
      return absl::InternalError(absl::StrCat(path, " holds ", data.size(), " bytes"));
    }
    archives_.try_emplace(sha256, std::move(data));
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> Size(const std::string& sha256) override {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(down_);
    auto it = archives_.find(sha256);
    if (it == archives_.end()) return absl::NotFoundError(sha256);
    return static_cast<int64_t>(it->second.size());
  }
  absl::StatusOr<std::string> Read(const std::string& sha256, int64_t offset,
                                   int max_bytes) override {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(down_);
    ++reads_;
    auto it = archives_.find(sha256);
    if (it == archives_.end()) return absl::NotFoundError(sha256);
    return it->second.substr(static_cast<size_t>(offset), static_cast<size_t>(max_bytes));
  }
  absl::StatusOr<std::map<std::string, int64_t>> List() override {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(down_);
    std::map<std::string, int64_t> sizes;
    for (const auto& [sha256, data] : archives_) sizes[sha256] = static_cast<int64_t>(data.size());
    return sizes;
  }
  absl::Status Remove(const std::string& sha256) override {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(down_);
    archives_.erase(sha256);
    return absl::OkStatus();
  }

  // Every call fails with `status` (OK: they work again).
  void SetDown(absl::Status status) {
    MutexLock lock(&mu_);
    down_ = std::move(status);
  }
  bool Holds(const std::string& sha256) {
    MutexLock lock(&mu_);
    return archives_.count(sha256) > 0;
  }
  int reads() {
    MutexLock lock(&mu_);
    return reads_;
  }

 private:
  Mutex mu_;
  std::map<std::string, std::string> archives_ ABSL_GUARDED_BY(mu_);
  absl::Status down_ ABSL_GUARDED_BY(mu_);
  int reads_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CODE_FAKE_SHARED_CODE_ARCHIVES_H_
