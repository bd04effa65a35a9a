#include "worker/gpu_discovery.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

// On a machine without a GPU this must say why instead of failing; with a
// GPU it must find at least one with its memory size.
TEST(GpuDiscoveryTest, FindsGpusOrSaysWhyNot) {
  std::string why;
  std::vector<v1::Gpu> gpus = DiscoverGpus(&why);
  if (gpus.empty()) {
    EXPECT_FALSE(why.empty());
    GTEST_SKIP() << "no GPU here: " << why;
  }
  for (const auto& gpu : gpus) EXPECT_GT(gpu.memory_total_bytes(), 0);
}

}  // namespace
}  // namespace ringmaster
