#include "trainer/host_layout.h"

#include <sys/stat.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "trainer/catch_status.h"

namespace ringmaster {

HostLayout LayoutOf(const std::vector<std::string>& identity_of_rank, int rank) {
  std::vector<std::string> hosts;  // in order of first appearance
  std::vector<int> ranks_on;       // per host
  HostLayout layout;
  for (int r = 0; r < static_cast<int>(identity_of_rank.size()); ++r) {
    int h = 0;
    while (h < static_cast<int>(hosts.size()) && hosts[h] != identity_of_rank[r]) ++h;
    if (h == static_cast<int>(hosts.size())) {
      hosts.push_back(identity_of_rank[r]);
      ranks_on.push_back(0);
    }
    if (r == rank) {
      layout.host = h;
      layout.local_rank = ranks_on[h];
    }
    ++ranks_on[h];
  }
  layout.hosts = static_cast<int>(hosts.size());
  layout.local_size = ranks_on[layout.host];
  for (int count : ranks_on) layout.uniform &= count == layout.local_size;
  return layout;
}

std::string HostIdentity() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  std::getline(boot, boot_id);
  // Ranks meet in shared memory only where they see one /dev/shm: two
  // workers of one machine give a job a private one each.
  struct stat shm {};
  stat("/dev/shm", &shm);
  return absl::StrCat(Hostname(), "/", boot_id, "/shm:", shm.st_dev);
}

absl::StatusOr<std::vector<std::string>> GatherFromAll(gloo::rendezvous::Store& store,
                                                       const std::string& key, int rank, int size,
                                                       const std::string& value) {
  std::vector<std::string> values(size);
  absl::Status status = CatchAsStatus("rendezvous store", [&] {
    store.set(absl::StrCat(key, "/", rank), std::vector<char>(value.begin(), value.end()));
    for (int r = 0; r < size; ++r) {
      // Not every Store's get waits for the key (HashStore's does not).
      store.wait({absl::StrCat(key, "/", r)});
      std::vector<char> theirs = store.get(absl::StrCat(key, "/", r));
      values[r].assign(theirs.begin(), theirs.end());
    }
  });
  if (!status.ok()) return status;
  return values;
}

absl::StatusOr<HostLayout> ExchangeHostLayout(gloo::rendezvous::Store& store,
                                              const std::string& key, int rank, int size,
                                              const std::string& identity) {
  absl::StatusOr<std::vector<std::string>> identities =
      GatherFromAll(store, key, rank, size, identity);
  if (!identities.ok()) return identities.status();
  return LayoutOf(*identities, rank);
}

}  // namespace ringmaster
