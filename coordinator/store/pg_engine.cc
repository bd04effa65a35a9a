#include "coordinator/store/pg_engine.h"

#include "common/clock.h"
#include "common/status_macros.h"
#include "coordinator/store/leader_lease.h"
#include "coordinator/store/pg_code_archives.h"
#include "coordinator/store/pg_db.h"
#include "coordinator/store/pg_job_store.h"
#include "coordinator/store/pg_rendezvous_journal.h"

namespace ringmaster {
namespace {

constexpr absl::Duration kConnectTimeout = absl::Seconds(10);

// The election on a connection of its own, made again when lost.
class PgLease final : public Lease {
 public:
  PgLease(std::unique_ptr<PgDb> db, LeaseOptions options)
      : db_(std::move(db)), lease_(db_.get(), RealClock::Get(), std::move(options)) {}

  absl::StatusOr<LeaseState> Step() override {
    if (!db_->connected()) RETURN_IF_ERROR(db_->Reset());
    return lease_.Step();
  }
  const LeaseState& state() const override { return lease_.state(); }
  absl::Status Release() override { return lease_.Release(); }

 private:
  const std::unique_ptr<PgDb> db_;
  LeaderLease lease_;
};

class PgEngine final : public StoreEngine {
 public:
  explicit PgEngine(StoreConfig config) : config_(std::move(config)) {}

  std::string label() const override { return StoreLabel(config_); }
  bool shared() const override { return true; }
  absl::StatusOr<std::unique_ptr<JobStore>> OpenJobStore(int64_t term) override {
    return PgJobStore::Open({config_.conninfo, config_.password, LeaderLease::FenceOf(term)});
  }
  absl::StatusOr<std::unique_ptr<JobStore>> OpenJobReader() override {
    PgJobStoreOptions read;
    read.conninfo = config_.conninfo;
    read.password = config_.password;
    read.read_only = true;  // a standby never writes
    return PgJobStore::Open(read);
  }
  absl::StatusOr<std::unique_ptr<RendezvousJournal>> OpenRendezvousJournal(int64_t term) override {
    ASSIGN_OR_RETURN(
        std::unique_ptr<PgRendezvousJournal> journal,
        PgRendezvousJournal::Start(config_.conninfo, config_.password, LeaderLease::FenceOf(term)));
    return std::unique_ptr<RendezvousJournal>(std::move(journal));
  }
  std::unique_ptr<SharedCodeArchives> OpenCodeArchives(int64_t term) override {
    return std::make_unique<PgCodeArchives>(PgPool::Options{config_.conninfo, config_.password},
                                            LeaderLease::FenceOf(term));
  }
  absl::StatusOr<std::unique_ptr<Lease>> OpenLease(LeaseOptions options) override {
    ASSIGN_OR_RETURN(std::unique_ptr<PgDb> db,
                     PgDb::Connect(config_.conninfo, kConnectTimeout, config_.password));
    RETURN_IF_ERROR(LeaderLease::CreateTable(db.get()));
    return std::unique_ptr<Lease>(std::make_unique<PgLease>(std::move(db), std::move(options)));
  }
  absl::StatusOr<std::string> SharedCredentialKey(const std::string& local) override {
    return ringmaster::SharedCredentialKey({config_.conninfo, config_.password}, local);
  }
  absl::Status RotateSharedCredentialKey(const std::string& next) override {
    return ringmaster::RotateSharedCredentialKey({config_.conninfo, config_.password}, next);
  }

 private:
  const StoreConfig config_;
};

}  // namespace

std::unique_ptr<StoreEngine> OpenPgEngine(const StoreConfig& config, const std::string&) {
  return std::make_unique<PgEngine>(config);
}

}  // namespace ringmaster
