// A user program instead of the built-in trainer: an unmodified PyTorch DDP
// script (Debian's python3-torch) runs as a 2-rank job under the torchrun
// environment contract.
#include <gtest/gtest.h>

#include "tests/cluster_fixture.h"

namespace ringmaster {
namespace {

using PytorchDdpTest = ClusterTest;

TEST_F(PytorchDdpTest, UnmodifiedDdpScriptTrainsOnTwoRanks) {
  testing::CommandResult torch = testing::Shell("/usr/bin/python3 -c 'import torch'");
  ASSERT_EQ(torch.exit_code, 0) << "python3-torch is needed (./dev installs it): " << torch.err;
  const std::string spec = absl::StrCat("name: torch-ddp\nranks: 2\ncommand: [/usr/bin/python3, ",
                                        testing::Runfile("tests/ddp_train.py"), "]\n");
  testing::CommandResult r = Cli({"submit", WriteSpec("ddp", spec), "--follow"});
  const std::string id = r.out.substr(0, r.out.find('\n'));
  testing::CommandResult logs = Cli({"logs", id});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << logs.out;
  EXPECT_NE(logs.out.find("[rank 0] rank 0/2 local_rank 0: replicas agree"), std::string::npos)
      << logs.out;
  EXPECT_NE(logs.out.find("[rank 1] rank 1/2 local_rank 0: replicas agree"), std::string::npos)
      << logs.out;
}

// torchrun's error file: the exception a rank recorded is the job's root
// cause, in its reason and in `status`.
TEST_F(PytorchDdpTest, ARanksRecordedExceptionIsTheRootCause) {
  testing::CommandResult torch = testing::Shell("/usr/bin/python3 -c 'import torch'");
  ASSERT_EQ(torch.exit_code, 0) << "python3-torch is needed (./dev installs it): " << torch.err;
  const std::string spec = absl::StrCat("name: raises\nranks: 2\ncommand: [/usr/bin/python3, ",
                                        testing::Runfile("tests/raise_on_rank.py"), "]\n");
  testing::CommandResult r = Cli({"submit", WriteSpec("raises", spec), "--follow"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const std::string id = r.out.substr(0, r.out.find('\n'));
  const v1::Job job = WaitJob(id, [](const v1::Job& j) { return j.state() == v1::FAILED; });
  ASSERT_TRUE(job.has_root_cause());
  EXPECT_EQ(job.root_cause().error(), "ValueError: bad input on rank 1");
  EXPECT_EQ(job.root_cause().rank(), 1);
  const std::string worker = job.ranks(1).worker_id();
  EXPECT_EQ(job.root_cause().worker_id(), worker);
  EXPECT_EQ(job.history(job.history_size() - 1).message(),
            "rank 1 exited with code 1: ValueError: bad input on rank 1");
  EXPECT_NE(r.out.find("ValueError: bad input on rank 1"), std::string::npos)
      << "--follow shows the reason: " << r.out;
  testing::CommandResult status = Cli({"status", id});
  EXPECT_NE(status.out.find(absl::StrCat("root cause: ValueError: bad input on rank 1 (rank 1 "
                                         "on worker ",
                                         worker, ", attempt 0)")),
            std::string::npos)
      << status.out;
}

}  // namespace
}  // namespace ringmaster
