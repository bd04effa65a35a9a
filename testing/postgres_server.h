// A PostgreSQL server of the test's own, as users run it: Debian's
// postgresql-15, initdb into a fresh directory and pg_ctl on a free port of
// 127.0.0.1, as the unprivileged user `nobody` when the test runs as root
// (PostgreSQL refuses to run as root). The database `ringmaster` belongs to
// the user `ringmaster`, who signs in with a password (scram-sha-256) when
// one is given. The server is stopped and its directory removed with the
// object; one whose test died is removed by the next Start.
#ifndef RINGMASTER_TESTING_POSTGRES_SERVER_H_
#define RINGMASTER_TESTING_POSTGRES_SERVER_H_

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "absl/status/statusor.h"

namespace ringmaster::testing {

class PostgresServer {
 public:
  struct Options {
    std::string password;  // empty: trust (no password)
    // Where it listens; beyond loopback (simulated hosts' bridge), clients
    // from any address are let in as on loopback.
    std::string listen_address = "127.0.0.1";
  };

  // Why no server can run here (postgresql-15 is not installed), or empty.
  static std::string Unavailable();
  static absl::StatusOr<std::unique_ptr<PostgresServer>> Start(const Options& options);
  static absl::StatusOr<std::unique_ptr<PostgresServer>> Start() { return Start(Options{}); }
  ~PostgresServer();

  // "host=<listen address> port=N user=ringmaster dbname=ringmaster",
  // without the password.
  std::string conninfo() const;
  int port() const { return port_; }
  const std::string& dir() const { return dir_; }

  // Stops the server (fast shutdown: clients are disconnected), and starts
  // it again on the same port and data.
  absl::Status Stop();
  absl::Status Restart();

 private:
  PostgresServer(std::string dir, std::string host, int port, bool as_nobody)
      : dir_(std::move(dir)), host_(std::move(host)), port_(port), as_nobody_(as_nobody) {}
  absl::Status StartServer() const;

  const std::string dir_;
  const std::string host_;
  const int port_;
  const bool as_nobody_;
};

// A fixture with a server of its own for each test; skips, saying why,
// where none can run.
class PostgresTest : public ::testing::Test {
 protected:
  void SetUp() override;
  std::unique_ptr<PostgresServer> server_;
};

}  // namespace ringmaster::testing

#endif  // RINGMASTER_TESTING_POSTGRES_SERVER_H_
