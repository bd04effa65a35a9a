#include "worker/nvml.h"

#include <cstdlib>

#include <gtest/gtest.h>

#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

constexpr char kFakeNvml[] = "worker/testing/libfake_nvml.so";

// A GPU's link, as `./dev gpu-check` prints it beside the measured bus
// bandwidth: NVLinks when active, else PCIe.
TEST(NvmlTest, TellsAGpusLinkAndItsBandwidthInOneDirection) {
  setenv("FAKE_NVML_DEVICES", "GPU-a:0:0:1:0:0:0;GPU-b:0:0:1:0:0:0", 1);
  auto nvml = Nvml::Load(testing::Runfile(kFakeNvml));
  ASSERT_OK(nvml) << nvml.status();

  setenv("FAKE_NVML_LINKS", "nvlink:6:18", 1);  // an H100 SXM
  absl::StatusOr<GpuLink> link = (*nvml)->Link("00000000:01:00.0");
  ASSERT_OK(link) << link.status();
  EXPECT_EQ(link->kind, "NVLink 4.0 x18");
  EXPECT_DOUBLE_EQ(link->gb_per_second, 450);

  setenv("FAKE_NVML_LINKS", "pcie:4:16", 1);
  link = (*nvml)->Link("0000:00:00.0");
  ASSERT_OK(link) << link.status();
  EXPECT_EQ(link->kind, "PCIe 4 x16");
  EXPECT_NEAR(link->gb_per_second, 31.5, 0.01);

  unsetenv("FAKE_NVML_LINKS");
  EXPECT_EQ((*nvml)->Link("0000:00:00.0").status().message(),
            "NVML cannot tell the links of GPU 0000:00:00.0");
  EXPECT_EQ((*nvml)->Link("0000:07:00.0").status().message(),
            "NVML knows no GPU at PCI bus id 0000:07:00.0 (error 6)");
}

TEST(NvmlTest, LinkFiguresPerVersionAndGeneration) {
  EXPECT_EQ(NvlinkGbPerSecond(4), 25);  // 3.0, an A100's (x12: 300 GB/s)
  EXPECT_EQ(NvlinkGbPerSecond(7), 50);  // 5.0
  EXPECT_EQ(NvlinkGbPerSecond(0), 0);
  EXPECT_EQ(NvlinkGbPerSecond(8), 0);
  EXPECT_EQ(PcieLaneGbPerSecond(5), 3.938);
  EXPECT_EQ(PcieLaneGbPerSecond(9), 0);
}

}  // namespace
}  // namespace ringmaster
