// A rank program for integration tests: checks every variable of the rank
// environment contract, then exchanges a value with every other rank
// through the coordinator's rendezvous store. Exits 0 when all holds;
// otherwise prints what is wrong and exits 1.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "domain/rendezvous_client.h"

namespace {

int failures = 0;

std::string Need(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) {
    std::cout << "MISSING " << name << std::endl;
    ++failures;
    return "";
  }
  return value;
}

int NeedInt(const char* name) {
  int v = -1;
  if (!absl::SimpleAtoi(Need(name), &v)) {
    std::cout << "NOT AN INTEGER " << name << std::endl;
    ++failures;
  }
  return v;
}

void Expect(bool ok, const std::string& what) {
  if (!ok) {
    std::cout << "WRONG " << what << std::endl;
    ++failures;
  }
}

}  // namespace

int main() {
  const int rank = NeedInt("RANK");
  const int world = NeedInt("WORLD_SIZE");
  const int local_rank = NeedInt("LOCAL_RANK");
  const int local_world = NeedInt("LOCAL_WORLD_SIZE");
  const int group_rank = NeedInt("GROUP_RANK");
  const int group_world = NeedInt("GROUP_WORLD_SIZE");
  const int master_port = NeedInt("MASTER_PORT");
  const int restarts = NeedInt("TORCHELASTIC_RESTART_COUNT");
  NeedInt("TORCHELASTIC_MAX_RESTARTS");
  Expect(rank >= 0 && rank < world, "RANK in [0, WORLD_SIZE)");
  Expect(local_rank >= 0 && local_rank < local_world, "LOCAL_RANK in [0, LOCAL_WORLD_SIZE)");
  Expect(group_rank >= 0 && group_rank < group_world, "GROUP_RANK in [0, GROUP_WORLD_SIZE)");
  Expect(NeedInt("ROLE_RANK") == rank, "ROLE_RANK == RANK");
  Expect(NeedInt("ROLE_WORLD_SIZE") == world, "ROLE_WORLD_SIZE == WORLD_SIZE");
  Expect(!Need("ROLE_NAME").empty(), "ROLE_NAME set");
  Expect(!Need("MASTER_ADDR").empty(), "MASTER_ADDR set");
  Expect(master_port > 0 && master_port < 65536 && master_port != 29500,
         "MASTER_PORT a real port, not the fixed 29500");
  const std::string job = Need("RINGMASTER_JOB_ID");
  Expect(Need("TORCHELASTIC_RUN_ID") == job, "TORCHELASTIC_RUN_ID == RINGMASTER_JOB_ID");
  Expect(!Need("TORCHELASTIC_ERROR_FILE").empty(), "TORCHELASTIC_ERROR_FILE set");
  Need("CUDA_VISIBLE_DEVICES");
  Expect(Need("OMP_NUM_THREADS") == "1", "OMP_NUM_THREADS == 1");
  Expect(!Need("RINGMASTER_COORDINATOR").empty(), "RINGMASTER_COORDINATOR set");
  const std::string checkpoint_dir = Need("RINGMASTER_CHECKPOINT_DIR");
  Expect(checkpoint_dir.size() > job.size() &&
             checkpoint_dir.compare(checkpoint_dir.size() - job.size(), job.size(), job) == 0,
         "RINGMASTER_CHECKPOINT_DIR ends with the job id");
  if (failures > 0) return 1;

  auto store = ringmaster::RendezvousClient::FromEnvironment();
  if (!store.ok()) {
    std::cout << store.status() << std::endl;
    return 1;
  }
  const std::string mine = absl::StrCat("value-from-", rank, "-attempt-", restarts);
  if (auto s = (*store)->Set(absl::StrCat("rank/", rank), mine); !s.ok()) {
    std::cout << "set: " << s << std::endl;
    return 1;
  }
  std::vector<std::string> keys;
  for (int r = 0; r < world; ++r) keys.push_back(absl::StrCat("rank/", r));
  if (auto s = (*store)->Wait(keys, absl::Seconds(60)); !s.ok()) {
    std::cout << "wait: " << s << std::endl;
    return 1;
  }
  for (int r = 0; r < world; ++r) {
    auto value = (*store)->Get(absl::StrCat("rank/", r));
    Expect(value.ok() && *value == absl::StrCat("value-from-", r, "-attempt-", restarts),
           absl::StrCat("rendezvous value of rank ", r));
  }
  auto arrived = (*store)->Add("arrived", 1);
  Expect(arrived.ok() && *arrived >= 1 && *arrived <= world, "atomic add");
  std::cout << "rank " << rank << " of " << world << ": contract holds" << std::endl;
  return failures == 0 ? 0 : 1;
}
