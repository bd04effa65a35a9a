#include "common/net.h"
#include "testing/status_matchers.h"

#include <fstream>
#include <set>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

TEST(PickFreePortTest, DrawsBelowTheEphemeralRangeAPortThatBinds) {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int ephemeral = 32768, high = 0;
  in >> ephemeral >> high;
  std::set<int> seen;
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<int> port = PickFreePort("127.0.0.1");
    ASSERT_OK(port) << port.status();
    EXPECT_GE(*port, kLowestPickedPort);
    EXPECT_LT(*port, ephemeral) << "the kernel may give it to a bind to port 0 or a connection";
    seen.insert(*port);
  }
  EXPECT_GT(seen.size(), 40u) << "drawn at random";
  EXPECT_THAT(PickFreePort("not-an-address").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace ringmaster
