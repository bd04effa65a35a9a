// The PostgreSQL engine (--store postgresql://...): one database shared by
// several coordinators, which elect a leader by a fenced lease in it
// (LeaderLease). The leader's every write checks its term.
#ifndef RINGMASTER_COORDINATOR_STORE_PG_ENGINE_H_
#define RINGMASTER_COORDINATOR_STORE_PG_ENGINE_H_

#include <memory>
#include <string>

#include "coordinator/store/store_engine.h"
#include "domain/store_config.h"

namespace ringmaster {

std::unique_ptr<StoreEngine> OpenPgEngine(const StoreConfig& config, const std::string& state_dir);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_STORE_PG_ENGINE_H_
