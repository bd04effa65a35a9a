#include "testing/postgres_server.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "common/status_macros.h"
#include "testing/test_util.h"

namespace ringmaster::testing {
namespace {

constexpr char kBin[] = "/usr/lib/postgresql/15/bin";

std::string Quote(const std::string& s) { return absl::StrCat("'", s, "'"); }

// Runs a PostgreSQL program as the servers' user; its output in the error.
absl::Status RunAsServerUser(bool as_nobody, const std::string& program, const std::string& args) {
  const std::string line = absl::StrCat(as_nobody ? "/usr/sbin/runuser -u nobody -- " : "", kBin,
                                        "/", program, " ", args, " 2>&1");
  CommandResult result = Shell(line);
  if (result.exit_code == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(line, ": exit ", result.exit_code, ": ", result.out));
}

// pg_ctl stop, "fast" (clients disconnected) or "immediate" (no shutdown
// checkpoint), for the server of `dir`.
absl::Status StopServer(bool as_nobody, const std::string& dir, const std::string& mode) {
  return RunAsServerUser(as_nobody, "pg_ctl",
                         absl::StrCat("-D ", Quote(dir + "/data"), " -m ", mode, " -w stop"));
}

// Gives `path` to `nobody`, the servers' user when the test runs as root.
absl::Status GiveToNobody(const std::string& path) {
  const passwd* nobody = getpwnam("nobody");
  if (nobody != nullptr && chown(path.c_str(), nobody->pw_uid, nobody->pw_gid) == 0) {
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrCat("chown nobody ", path));
}

// Servers whose test died before it could stop them: their directory
// names a process that is gone.
void RemoveOrphans(bool as_nobody) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/tmp", error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ringmaster-pg-", 0) != 0) continue;
    std::ifstream owner(entry.path() / "owner");
    int pid = 0;
    if (!(owner >> pid) || pid <= 0 || ProcessAlive(pid)) continue;
    StopServer(as_nobody, entry.path().string(), "immediate").IgnoreError();
    std::filesystem::remove_all(entry.path(), error);
  }
}

}  // namespace

std::string PostgresServer::Unavailable() {
  if (access(absl::StrCat(kBin, "/pg_ctl").c_str(), X_OK) != 0) {
    return absl::StrCat(kBin, "/pg_ctl is missing: install postgresql-15 (./dev test does)");
  }
  if (geteuid() == 0 && getpwnam("nobody") == nullptr) {
    return "running as root, PostgreSQL needs an unprivileged user and there is no `nobody`";
  }
  return "";
}

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Start(const Options& options) {
  if (std::string why = Unavailable(); !why.empty()) return absl::FailedPreconditionError(why);
  // Under /tmp, not the test's directory: `nobody` must reach it.
  char templ[] = "/tmp/ringmaster-pg-XXXXXX";
  if (mkdtemp(templ) == nullptr) return absl::InternalError("mkdtemp /tmp/ringmaster-pg-*");
  const bool as_nobody = geteuid() == 0;
  RemoveOrphans(as_nobody);
  std::ofstream(absl::StrCat(templ, "/owner")) << getpid() << "\n";
  if (as_nobody) RETURN_IF_ERROR(GiveToNobody(templ));
  ASSIGN_OR_RETURN(int port, PickFreePort(options.listen_address));
  std::unique_ptr<PostgresServer> server(
      new PostgresServer(templ, options.listen_address, port, as_nobody));
  const std::string pwfile = server->dir_ + "/password";
  std::string auth = "--auth=trust";
  if (!options.password.empty()) {
    std::ofstream(pwfile) << options.password << "\n";
    if (as_nobody) RETURN_IF_ERROR(GiveToNobody(pwfile));
    auth = absl::StrCat("--auth-local=trust --auth-host=scram-sha-256 --pwfile=", Quote(pwfile));
  }
  RETURN_IF_ERROR(RunAsServerUser(as_nobody, "initdb",
                                  absl::StrCat("-D ", Quote(server->dir_ + "/data"),
                                               " -U ringmaster -E UTF8 --no-sync ", auth)));
  if (options.listen_address != "127.0.0.1") {
    std::ofstream(server->dir_ + "/data/pg_hba.conf", std::ios::app)
        << "host all all 0.0.0.0/0 " << (options.password.empty() ? "trust" : "scram-sha-256")
        << "\n";
  }
  RETURN_IF_ERROR(server->StartServer());
  // Over the socket in its directory, which trusts the server's own user.
  RETURN_IF_ERROR(RunAsServerUser(
      as_nobody, "createdb",
      absl::StrCat("-h ", Quote(server->dir_), " -p ", port, " -U ringmaster ringmaster")));
  return server;
}

PostgresServer::~PostgresServer() {
  StopServer(as_nobody_, dir_, "immediate").IgnoreError();
  std::error_code error;
  std::filesystem::remove_all(dir_, error);
}

std::string PostgresServer::conninfo() const {
  return absl::StrCat("host=", host_, " port=", port_, " user=ringmaster dbname=ringmaster");
}

absl::Status PostgresServer::StartServer() const {
  return RunAsServerUser(
      as_nobody_, "pg_ctl",
      absl::StrCat("-D ", Quote(dir_ + "/data"), " -l ", Quote(dir_ + "/server.log"),
                   " -w -t 60 -o ",
                   Quote(absl::StrCat("-p ", port_, " -k ", dir_, " -c listen_addresses=", host_)),
                   " start"));
}

absl::Status PostgresServer::Stop() { return StopServer(as_nobody_, dir_, "fast"); }

absl::Status PostgresServer::Restart() { return StartServer(); }

void PostgresTest::SetUp() {
  if (std::string why = PostgresServer::Unavailable(); !why.empty()) GTEST_SKIP() << why;
  absl::StatusOr<std::unique_ptr<PostgresServer>> server = PostgresServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = *std::move(server);
}

}  // namespace ringmaster::testing
