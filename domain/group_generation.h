// The group of an attempt's ranks: formed at the attempt's start
// (generation 0), and again each time a failed rank's process is replaced,
// or an elastic job goes on without it, while the others keep theirs
// (docs/checkpoints.md). The coordinator announces generation N > 0 by
// setting GroupKey(N) in the attempt's rendezvous scope to the group's
// members (GroupValue); the group's collectives bootstrap under
// GroupPrefix(N), apart from every group before it.
#ifndef RINGMASTER_DOMAIN_GROUP_GENERATION_H_
#define RINGMASTER_DOMAIN_GROUP_GENERATION_H_

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ringmaster {

inline std::string GroupKey(int generation) { return absl::StrCat("group/", generation); }

// GroupKey's value: the members' ranks (the ranks their processes started
// with), ascending, as "0,2,3". A member's rank in the group's collectives
// is its index in it.
inline std::string GroupValue(const std::vector<int>& members) {
  return absl::StrJoin(members, ",");
}

// The members of a GroupValue; false when it is not one.
inline bool ParseGroupValue(const std::string& value, std::vector<int>* members) {
  members->clear();
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    int rank;
    if (!absl::SimpleAtoi(part, &rank) || rank < 0 ||
        (!members->empty() && rank <= members->back())) {
      return false;
    }
    members->push_back(rank);
  }
  return true;
}

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
