// Code archives in PostgreSQL, shared by every coordinator of one store:
// an archive is a row of code_archives (its size) and its bytes in rows of
// code_chunks, a MiB each, so that a worker's read of a MiB is one row and
// no statement carries a whole archive. The rows are written in one
// transaction, the size last: an archive listed is whole.
#ifndef RINGMASTER_COORDINATOR_STORE_PG_CODE_ARCHIVES_H_
#define RINGMASTER_COORDINATOR_STORE_PG_CODE_ARCHIVES_H_

#include <cstdint>
#include <map>
#include <string>

#include "coordinator/code/code_store.h"
#include "coordinator/store/pg_db.h"
#include "coordinator/store/pg_fence.h"

namespace ringmaster {

// Thread-safe; the tables are the job store's (PgJobStore makes them).
class PgCodeArchives final : public SharedCodeArchives {
 public:
  static constexpr int kChunkBytes = 1 << 20;

  // Removals are fenced (empty: not), so that a deposed leader cannot
  // remove what the next one uses.
  PgCodeArchives(PgPool::Options options, PgFence fence)
      : pool_(std::move(options)), fence_(std::move(fence)) {}

  absl::Status Put(const std::string& sha256, const std::string& path, int64_t bytes) override;
  absl::StatusOr<int64_t> Size(const std::string& sha256) override;
  absl::StatusOr<std::string> Read(const std::string& sha256, int64_t offset,
                                   int max_bytes) override;
  absl::StatusOr<std::map<std::string, int64_t>> List() override;
  absl::Status Remove(const std::string& sha256) override;

 private:
  PgPool pool_;
  const PgFence fence_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_STORE_PG_CODE_ARCHIVES_H_
