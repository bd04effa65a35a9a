// Where the coordinator keeps its state (--store): SQLite, a file of its
// own, or PostgreSQL, shared by several coordinators. A PostgreSQL
// password never comes from the command line, which every user of the
// machine can read in ps: it comes from a file only its owner can read
// (--store-password-file), or libpq's PGPASSFILE.
#ifndef RINGMASTER_DOMAIN_STORE_CONFIG_H_
#define RINGMASTER_DOMAIN_STORE_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"

namespace ringmaster {

struct StoreConfig {
  enum class Engine { kSqlite, kPostgres };
  Engine engine = Engine::kSqlite;
  std::string sqlite_path;  // kSqlite: the database file
  std::string conninfo;     // kPostgres: a libpq URI, without a password
  std::string password;     // kPostgres: from --store-password-file; empty: libpq's own
};

// `store` is "sqlite:///ABSOLUTE/PATH", "postgresql://..." (or
// "postgres://...", libpq's URI), or empty: SQLite at
// <state_dir>/coordinator.db. `password_file` (PostgreSQL only) holds the
// password, and must pass CheckSecretFileMode. INVALID_ARGUMENT naming
// what is wrong: another scheme, a relative path, a password in the URI;
// FAILED_PRECONDITION for a password file that cannot be used.
absl::StatusOr<StoreConfig> ParseStoreConfig(const std::string& store,
                                             const std::string& password_file,
                                             const std::string& state_dir);

// The store for people and logs: the URI without its query (which may name
// files), "sqlite:///var/lib/ringmaster/coordinator.db".
std::string StoreLabel(const StoreConfig& config);

}  // namespace ringmaster

#endif  // RINGMASTER_DOMAIN_STORE_CONFIG_H_
