// The SQLite engine (--store sqlite:///PATH, the default): one file of the
// coordinator's own. Not shared: the rendezvous keys stay in memory, the
// code in the state directory, and there is no election.
#ifndef RINGMASTER_COORDINATOR_STORE_SQLITE_ENGINE_H_
#define RINGMASTER_COORDINATOR_STORE_SQLITE_ENGINE_H_

#include <memory>
#include <string>

#include "coordinator/store/store_engine.h"
#include "domain/store_config.h"

namespace ringmaster {

// The file is config.sqlite_path, else <state_dir>/coordinator.db.
std::unique_ptr<StoreEngine> OpenSqliteEngine(const StoreConfig& config,
                                              const std::string& state_dir);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_STORE_SQLITE_ENGINE_H_
