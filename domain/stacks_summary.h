// One line that says where an attempt's ranks are stuck, from their stacks:
// ranks waiting in the same collective are named together, with the ranks
// they wait for (those of the built-in trainer that are elsewhere):
//   "ranks 0, 2, 3 wait in all-reduce of bucket 4 at step 1250 for rank 1;
//    rank 1 is in forward (stopped)"
// Ranks without a flight record (user programs) are listed with their own
// summary: "rank 0: File "train.py", line 12 in main (sleeping)".
#ifndef RINGMASTER_DOMAIN_STACKS_SUMMARY_H_
#define RINGMASTER_DOMAIN_STACKS_SUMMARY_H_

#include <string>
#include <vector>

#include "proto/job.pb.h"

namespace ringmaster {

// A rank's own line, from what its worker found: "in all-reduce of bucket
// 4 at step 1250 (sleeping)", or its innermost Python or native frames.
std::string RankStacksLine(const v1::RankStacks& rank);

std::string SummarizeStacks(const std::vector<v1::RankStacks>& ranks);

}  // namespace ringmaster

#endif  // RINGMASTER_DOMAIN_STACKS_SUMMARY_H_
