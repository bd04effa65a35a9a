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

}  // namespace
}  // namespace ringmaster
