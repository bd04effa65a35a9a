// Which ranks of a job share a host (and so can share memory), and the
// place of each rank on its host: what the hierarchical all-reduce is built
// on.
#ifndef RINGMASTER_TRAINER_HOST_LAYOUT_H_
#define RINGMASTER_TRAINER_HOST_LAYOUT_H_

#include <gloo/rendezvous/store.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster {

struct HostLayout {
  int host = 0;  // this rank's host, hosts numbered in order of their lowest rank
  int hosts = 1;
  int local_rank = 0;  // among the ranks of its host, in rank order
  int local_size = 1;
  bool uniform = true;  // every host has local_size ranks
};

// The layout seen by `rank` when rank r runs on host `identity_of_rank[r]`.
HostLayout LayoutOf(const std::vector<std::string>& identity_of_rank, int rank);

// This host's identity: its hostname and boot id (two hosts may share a
// hostname; a container shares its boot id with the machine), and its
// /dev/shm's device (ranks that do not share one are apart).
std::string HostIdentity();

// Every rank publishes `value` under `key` in `store`; returns every rank's
// value, in rank order, once all `size` ranks have published (it blocks
// until then).
absl::StatusOr<std::vector<std::string>> GatherFromAll(gloo::rendezvous::Store& store,
                                                       const std::string& key, int rank, int size,
                                                       const std::string& value);

// The layout from every rank's `identity`, gathered under `key`.
absl::StatusOr<HostLayout> ExchangeHostLayout(gloo::rendezvous::Store& store,
                                              const std::string& key, int rank, int size,
                                              const std::string& identity);

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_HOST_LAYOUT_H_
