#include "domain/store_config.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/token_file.h"

namespace ringmaster {
namespace {

constexpr char kPasswordAdvice[] =
    "put the password in a file only you can read (--store-password-file), or in PGPASSFILE: "
    "a command line is visible to every user in ps";

// Whether libpq's URI carries a password: "user:password@" before the
// host, or a "password=" parameter.
bool HasPassword(absl::string_view uri) {
  absl::string_view rest = uri.substr(uri.find("://") + 3);
  const absl::string_view authority = rest.substr(0, rest.find_first_of("/?"));
  const size_t at = authority.rfind('@');
  if (at != absl::string_view::npos &&
      authority.substr(0, at).find(':') != absl::string_view::npos) {
    return true;
  }
  const size_t query = uri.find('?');
  if (query == absl::string_view::npos) return false;
  for (absl::string_view pair : absl::StrSplit(uri.substr(query + 1), '&')) {
    if (absl::StartsWith(pair, "password=")) return true;
  }
  return false;
}

absl::StatusOr<std::string> ReadPassword(const std::string& path) {
  absl::StatusOr<std::string> text = ReadSecretFile(path, "--store-password-file");
  if (!text.ok()) return text.status();
  std::string password(absl::StripTrailingAsciiWhitespace(*text));
  if (password.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("--store-password-file ", path, " is empty"));
  }
  return password;
}

}  // namespace

absl::StatusOr<StoreConfig> ParseStoreConfig(const std::string& store,
                                             const std::string& password_file,
                                             const std::string& state_dir) {
  StoreConfig config;
  absl::string_view rest = store;
  if (store.empty() || absl::ConsumePrefix(&rest, "sqlite://")) {
    config.uri = store;
    config.sqlite_path = store.empty() ? state_dir + "/coordinator.db" : std::string(rest);
    if (!absl::StartsWith(config.sqlite_path, "/")) {
      return absl::InvalidArgumentError(
          absl::StrCat("--store ", store,
                       ": a SQLite store is sqlite:// and an absolute path, "
                       "as in sqlite:///var/lib/ringmaster/coordinator.db"));
    }
    if (!password_file.empty()) {
      return absl::InvalidArgumentError("--store-password-file is for a PostgreSQL --store");
    }
    return config;
  }
  const size_t colon = store.find("://");
  const std::string scheme = absl::AsciiStrToLower(store.substr(0, colon));
  if (colon == std::string::npos || scheme.empty() ||
      scheme.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789+.-") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--store ", store, ": not a URI such as sqlite:///PATH or postgresql://HOST/DATABASE"));
  }
  config.uri = store;
  config.engine = scheme == "postgres" ? StoreConfig::kPostgres : scheme;
  if (config.engine == StoreConfig::kPostgres) {
    if (HasPassword(store)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--store holds a password: ", kPasswordAdvice));
    }
    config.conninfo = store;
  }
  if (!password_file.empty()) {
    absl::StatusOr<std::string> password = ReadPassword(password_file);
    if (!password.ok()) return password.status();
    config.password = *std::move(password);
  }
  return config;
}

std::string StoreLabel(const StoreConfig& config) {
  if (config.engine == StoreConfig::kSqlite) return absl::StrCat("sqlite://", config.sqlite_path);
  return config.uri.substr(0, config.uri.find('?'));
}

}  // namespace ringmaster
