// Where the coordinator keeps its state (--store): a URI whose scheme names
// the engine. SQLite is a file of the coordinator's own; PostgreSQL is
// shared by several coordinators. Which engines a coordinator has is its
// store factory's (coordinator/store/store_factory.cc): this only reads the
// URI, and checks what it knows of the two engines above. A PostgreSQL
// password never comes from the command line, which every user of the
// machine can read in ps: it comes from a file only its owner can read
// (--store-password-file), or libpq's PGPASSFILE.
#ifndef RINGMASTER_DOMAIN_STORE_CONFIG_H_
#define RINGMASTER_DOMAIN_STORE_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"

namespace ringmaster {

struct StoreConfig {
  static constexpr char kSqlite[] = "sqlite";
  static constexpr char kPostgres[] = "postgresql";
  std::string engine = kSqlite;  // the URI's scheme ("postgres" is "postgresql")
  std::string uri;               // as given; empty for the default
  std::string sqlite_path;       // sqlite: the database file
  std::string conninfo;          // postgresql: a libpq URI, without a password
  std::string password;          // from --store-password-file; empty: the engine's own
};

// `store` is "sqlite:///ABSOLUTE/PATH", "postgresql://..." (or
// "postgres://...", libpq's URI), another engine's "SCHEME://...", or
// empty: SQLite at <state_dir>/coordinator.db. `password_file` (not for
// SQLite) holds the password, and must pass CheckSecretFileMode.
// INVALID_ARGUMENT naming what is wrong: no scheme, a relative path, a
// password in the URI; FAILED_PRECONDITION for a password file that cannot
// be used.
absl::StatusOr<StoreConfig> ParseStoreConfig(const std::string& store,
                                             const std::string& password_file,
                                             const std::string& state_dir);

// The store for people and logs: the URI without its query (which may name
// files), "sqlite:///var/lib/ringmaster/coordinator.db".
std::string StoreLabel(const StoreConfig& config);

}  // namespace ringmaster

#endif  // RINGMASTER_DOMAIN_STORE_CONFIG_H_
