// The group of an attempt's ranks: formed at the attempt's start
// (generation 0), and again each time a failed rank's process is replaced
// while the others keep theirs (docs/checkpoints.md). The coordinator
// announces generation N > 0 by setting GroupKey(N) in the attempt's
// rendezvous scope; the group's collectives bootstrap under GroupPrefix(N),
// apart from every group before it.
#ifndef RINGMASTER_DOMAIN_GROUP_GENERATION_H_
#define RINGMASTER_DOMAIN_GROUP_GENERATION_H_

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringmaster {

inline std::string GroupKey(int generation) { return absl::StrCat("group/", generation); }

// Empty for the attempt's first group: the backend's own prefix.
inline std::string GroupPrefix(int generation) {
  return generation == 0 ? std::string() : absl::StrCat("group/", generation);
}

// Where rank `rank` of group `generation` says it lost a peer (the value:
// the collective's error) before it waits for the next group, so that the
// coordinator restarts every rank at once when that peer's worker is gone.
inline std::string LostPeerKey(int generation, int rank) {
  return absl::StrCat("group/", generation, "/lost/", rank);
}

// The generation and rank of a LostPeerKey; false for any other key.
inline bool ParseLostPeerKey(const std::string& key, int* generation, int* rank) {
  const std::vector<std::string> parts = absl::StrSplit(key, '/');
  return parts.size() == 4 && parts[0] == "group" && parts[2] == "lost" &&
         absl::SimpleAtoi(parts[1], generation) && absl::SimpleAtoi(parts[3], rank);
}

}  // namespace ringmaster

#endif  // RINGMASTER_DOMAIN_GROUP_GENERATION_H_
