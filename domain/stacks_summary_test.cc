#include "domain/stacks_summary.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

v1::RankStacks Trainer(int rank, int64_t step, const std::string& phase, int bucket,
                       const std::string& process = "sleeping") {
  v1::RankStacks r;
  r.set_rank(rank);
  r.set_step(step);
  r.set_phase(phase);
  r.set_bucket(bucket);
  r.set_process(process);
  return r;
}

TEST(StacksSummaryTest, RanksWaitingInOneCollectiveNameTheRankTheyWaitFor) {
  EXPECT_EQ(SummarizeStacks({Trainer(0, 1250, "all-reduce", 4),
                             Trainer(1, 1250, "forward", -1, "stopped"),
                             Trainer(2, 1250, "all-reduce", 4), Trainer(3, 1250, "all-reduce", 4)}),
            "ranks 0, 2, 3 wait in all-reduce of bucket 4 at step 1250 for rank 1; rank 1 is in "
            "forward (stopped)");
  EXPECT_EQ(SummarizeStacks({Trainer(0, 7, "all-reduce", 0), Trainer(1, 6, "a checkpoint", -1)}),
            "rank 0 waits in all-reduce of bucket 0 at step 7 for rank 1; rank 1 is in a "
            "checkpoint at step 6");
  // Stopped inside a ring all-reduce it had done its part of: the others
  // went on to the next step's, and wait there for it.
  EXPECT_EQ(SummarizeStacks({Trainer(0, 8806, "all-reduce", 0),
                             Trainer(1, 8805, "all-reduce", 0, "stopped"),
                             Trainer(2, 8806, "all-reduce", 0)}),
            "ranks 0, 2 wait in all-reduce of bucket 0 at step 8806 for rank 1; rank 1 is in "
            "all-reduce of bucket 0 at step 8805 (stopped)");
  // Stopped inside the collective the others wait in.
  EXPECT_EQ(
      SummarizeStacks({Trainer(0, 42, "all-reduce", 0), Trainer(1, 42, "all-reduce", 0, "stopped"),
                       Trainer(2, 42, "all-reduce", 0)}),
      "ranks 0, 2 wait in all-reduce of bucket 0 at step 42 for rank 1; rank 1 is in "
      "all-reduce of bucket 0 (stopped)");
}

TEST(StacksSummaryTest, UserProgramsAreListedWithTheirInnermostFrame) {
  v1::RankStacks python;
  python.set_rank(1);
  python.set_process("sleeping");
  python.set_python("File \"/job/train.py\", line 6 in sleep_forever");
  v1::RankStacks native;
  native.set_rank(0);
  native.set_process("stopped");
  native.set_native("__GI___poll < main");
  EXPECT_EQ(SummarizeStacks({native, python}),
            "rank 0: in __GI___poll < main (stopped); rank 1: in File \"/job/train.py\", line 6 in "
            "sleep_forever (sleeping)");
  EXPECT_EQ(RankStacksLine(Trainer(2, 9, "all-reduce", 3)),
            "in all-reduce of bucket 3 at step 9 (sleeping)");
}

}  // namespace
}  // namespace ringmaster
