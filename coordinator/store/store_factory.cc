#include "coordinator/store/store_factory.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "coordinator/store/pg_engine.h"
#include "coordinator/store/sqlite_engine.h"

namespace ringmaster {
namespace {

using OpenEngine = std::unique_ptr<StoreEngine> (*)(const StoreConfig&, const std::string&);

// Every engine, by the scheme of its --store URI.
constexpr std::pair<absl::string_view, OpenEngine> kEngines[] = {
    {StoreConfig::kSqlite, &OpenSqliteEngine},
    {StoreConfig::kPostgres, &OpenPgEngine},
};

}  // namespace

absl::StatusOr<std::unique_ptr<StoreEngine>> OpenStoreEngine(const StoreConfig& config,
                                                             const std::string& state_dir) {
  std::vector<absl::string_view> names;
  for (const auto& [scheme, open] : kEngines) {
    if (scheme == config.engine) return open(config, state_dir);
    names.push_back(scheme);
  }
  return absl::InvalidArgumentError(absl::StrCat("--store ", config.uri, ": no store engine \"",
                                                 config.engine, "\"; this coordinator has ",
                                                 absl::StrJoin(names, ", ")));
}

}  // namespace ringmaster
