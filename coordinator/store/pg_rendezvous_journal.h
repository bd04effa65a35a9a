// The rendezvous keys in PostgreSQL (table rendezvous_keys, one row per
// key of each attempt in progress), written by a PgWriter of their own:
// concurrent Puts share a commit, and every commit is fenced by the
// leader's term, so a deposed leader keeps nothing more.
#ifndef RINGMASTER_COORDINATOR_STORE_PG_RENDEZVOUS_JOURNAL_H_
#define RINGMASTER_COORDINATOR_STORE_PG_RENDEZVOUS_JOURNAL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "coordinator/rendezvous/rendezvous_store.h"
#include "coordinator/store/pg_writer.h"

namespace ringmaster {

// Thread-safe; the table is the job store's (PgJobStore makes it).
class PgRendezvousJournal final : public RendezvousJournal {
 public:
  // How long a Put waits to be durable before it is refused.
  static constexpr absl::Duration kDurableTimeout = absl::Seconds(30);

  static absl::StatusOr<std::unique_ptr<PgRendezvousJournal>> Start(const std::string& conninfo,
                                                                    const std::string& password,
                                                                    PgFence fence);

  absl::StatusOr<int64_t> Put(const ScopeId& scope, const std::string& key,
                              const std::string& value) override;
  absl::Status WaitDurable(int64_t ticket) override;
  void Drop(const ScopeId& scope) override;
  absl::StatusOr<ScopesValues> Load() override;

 private:
  PgRendezvousJournal(std::string conninfo, std::string password, std::unique_ptr<PgWriter> writer)
      : conninfo_(std::move(conninfo)),
        password_(std::move(password)),
        writer_(std::move(writer)) {}

  const std::string conninfo_;
  const std::string password_;
  const std::unique_ptr<PgWriter> writer_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_STORE_PG_RENDEZVOUS_JOURNAL_H_
