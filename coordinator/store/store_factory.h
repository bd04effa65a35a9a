// The one place that picks the store engine for a --store URI.
#ifndef RINGMASTER_COORDINATOR_STORE_STORE_FACTORY_H_
#define RINGMASTER_COORDINATOR_STORE_STORE_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/store/store_engine.h"
#include "domain/store_config.h"

namespace ringmaster {

// The engine `config` names (its scheme), its files under `state_dir`
// where it keeps any. INVALID_ARGUMENT naming the engines there are when
// there is none of that name. Connects to nothing yet.
absl::StatusOr<std::unique_ptr<StoreEngine>> OpenStoreEngine(const StoreConfig& config,
                                                             const std::string& state_dir);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_STORE_STORE_FACTORY_H_
