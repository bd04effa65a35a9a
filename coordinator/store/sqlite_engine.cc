#include "coordinator/store/sqlite_engine.h"

#include "absl/strings/str_cat.h"
#include "coordinator/store/sqlite_job_store.h"

namespace ringmaster {
namespace {

class SqliteEngine final : public StoreEngine {
 public:
  explicit SqliteEngine(std::string path) : path_(std::move(path)) {}

  std::string label() const override { return absl::StrCat("sqlite://", path_); }
  bool shared() const override { return false; }
  absl::StatusOr<std::unique_ptr<JobStore>> OpenJobStore(int64_t) override {
    return SqliteJobStore::Open(path_);
  }
  absl::StatusOr<std::unique_ptr<JobStore>> OpenJobReader() override {
    return absl::UnimplementedError("a SQLite store has one coordinator: no standby reads it");
  }
  absl::StatusOr<std::unique_ptr<RendezvousJournal>> OpenRendezvousJournal(int64_t) override {
    return nullptr;
  }
  std::unique_ptr<SharedCodeArchives> OpenCodeArchives(int64_t) override { return nullptr; }
  absl::StatusOr<std::unique_ptr<Lease>> OpenLease(LeaseOptions) override {
    return absl::UnimplementedError("a SQLite store has one coordinator: there is no election");
  }
  absl::StatusOr<std::string> SharedCredentialKey(const std::string&) override {
    return absl::UnimplementedError("SQLite is no shared store");
  }
  absl::Status RotateSharedCredentialKey(const std::string&) override {
    return absl::UnimplementedError("SQLite is no shared store");
  }

 private:
  const std::string path_;
};

}  // namespace

std::unique_ptr<StoreEngine> OpenSqliteEngine(const StoreConfig& config,
                                              const std::string& state_dir) {
  return std::make_unique<SqliteEngine>(config.sqlite_path.empty() ? state_dir + "/coordinator.db"
                                                                   : config.sqlite_path);
}

}  // namespace ringmaster
