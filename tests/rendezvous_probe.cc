// A rank program for the HA test: sets its key in the job's rendezvous
// scope and says so, waits for the file named by its argument to appear
// (the test's signal), then waits for every rank's key and prints them.
// Exits 0 when every key was there; otherwise says why and exits 1.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "domain/rendezvous_client.h"

int main(int argc, char** argv) {
  int rank = -1;
  int world = 0;
  const char* rank_env = std::getenv("RANK");
  const char* world_env = std::getenv("WORLD_SIZE");
  if (argc != 2 || rank_env == nullptr || world_env == nullptr ||
      !absl::SimpleAtoi(rank_env, &rank) || !absl::SimpleAtoi(world_env, &world)) {
    std::cout << "usage: rendezvous_probe GO_FILE, as a rank" << std::endl;
    return 1;
  }
  absl::StatusOr<std::unique_ptr<ringmaster::RendezvousClient>> store =
      ringmaster::RendezvousClient::FromEnvironment();
  if (!store.ok()) {
    std::cout << store.status() << std::endl;
    return 1;
  }
  const std::string mine = absl::StrCat("rank-", rank);
  if (absl::Status s = (*store)->Set(mine, absl::StrCat("value of ", mine)); !s.ok()) {
    std::cout << "set: " << s << std::endl;
    return 1;
  }
  std::cout << "set " << mine << std::endl;
  const absl::Time give_up = absl::Now() + absl::Minutes(5);
  while (access(argv[1], F_OK) != 0) {
    if (absl::Now() > give_up) {
      std::cout << "no " << argv[1] << " after 5 minutes" << std::endl;
      return 1;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  std::vector<std::string> keys;
  for (int r = 0; r < world; ++r) keys.push_back(absl::StrCat("rank-", r));
  if (absl::Status s = (*store)->Wait(keys, absl::Seconds(60)); !s.ok()) {
    std::cout << "wait: " << s << std::endl;
    return 1;
  }
  for (const std::string& key : keys) {
    absl::StatusOr<std::string> value = (*store)->Get(key);
    if (!value.ok()) {
      std::cout << "get " << key << ": " << value.status() << std::endl;
      return 1;
    }
    std::cout << "got " << key << " = " << *value << std::endl;
  }
  return 0;
}
