// The group of an attempt's ranks: formed at the attempt's start
// (generation 0), and again each time a failed rank's process is replaced
// while the others keep theirs (docs/checkpoints.md). The coordinator
// announces generation N > 0 by setting GroupKey(N) in the attempt's
// rendezvous scope; the group's collectives bootstrap under GroupPrefix(N),
// apart from every group before it.
#ifndef RINGMASTER_DOMAIN_GROUP_GENERATION_H_
#define RINGMASTER_DOMAIN_GROUP_GENERATION_H_

#include <string>

#include "absl/strings/str_cat.h"

namespace ringmaster {

inline std::string GroupKey(int generation) { return absl::StrCat("group/", generation); }

// Empty for the attempt's first group: the backend's own prefix.
inline std::string GroupPrefix(int generation) {
  return generation == 0 ? std::string() : absl::StrCat("group/", generation);
}

}  // namespace ringmaster

#endif  // RINGMASTER_DOMAIN_GROUP_GENERATION_H_
