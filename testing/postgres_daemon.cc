// A PostgreSQL server for tests written in Python (tests/ha_partition_test.py):
//   postgres_daemon LISTEN_ADDRESS
// starts one as testing::PostgresServer does, listening on LISTEN_ADDRESS,
// prints its port on a line of its own, and stops it (removing its files)
// once its standard input closes. "stop" and "start" lines on standard
// input stop it and start it again, each answered by "ok" or the error.
#include <iostream>
#include <string>

#include "testing/postgres_server.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: postgres_daemon LISTEN_ADDRESS" << std::endl;
    return 2;
  }
  ringmaster::testing::PostgresServer::Options options;
  options.listen_address = argv[1];
  auto server = ringmaster::testing::PostgresServer::Start(options);
  if (!server.ok()) {
    std::cerr << "postgres_daemon: " << server.status() << std::endl;
    return 1;
  }
  std::cout << (*server)->port() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    absl::Status done = line == "stop"    ? (*server)->Stop()
                        : line == "start" ? (*server)->Restart()
                                          : absl::InvalidArgumentError("stop or start");
    std::cout << (done.ok() ? "ok" : done.ToString()) << std::endl;
  }
  return 0;
}
