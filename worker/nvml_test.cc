#include "worker/nvml.h"

#include <cstdlib>
#include <fstream>

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

// Errors come as NVML events (XIDs, double-bit ECC) and as counters; the
// fake library takes them from its control file.
TEST(NvmlTest, DeliversXidAndEccEventsAndCountsRetiredPages) {
  const std::string control = testing::MakeTempDir("nvml") + "/control";
  std::ofstream(control).close();
  setenv("FAKE_NVML_CONTROL", control.c_str(), 1);
  setenv("FAKE_NVML_DEVICES", "GPU-a:0:0:1:0:0:0:0;GPU-b:0:0:1:0:0:0:0", 1);
  auto nvml = Nvml::Load(testing::Runfile(kFakeNvml));
  ASSERT_OK(nvml) << nvml.status();
  EXPECT_FALSE((*nvml)->WaitEvent(absl::Milliseconds(10))) << "not watching yet";
  ASSERT_OK((*nvml)->WatchEvents());
  EXPECT_FALSE((*nvml)->WaitEvent(absl::Milliseconds(50))) << "nothing happened";

  std::ofstream(control, std::ios::app) << "xid 1 79\necc 0 3\nretired 1 2\n";
  std::optional<GpuEvent> xid = (*nvml)->WaitEvent(absl::Seconds(5));
  ASSERT_TRUE(xid.has_value());
  EXPECT_EQ(xid->index, 1);
  EXPECT_EQ(xid->uuid, "GPU-b");
  EXPECT_EQ(xid->xid, 79);
  std::optional<GpuEvent> ecc = (*nvml)->WaitEvent(absl::Seconds(5));
  ASSERT_TRUE(ecc.has_value());
  EXPECT_EQ(ecc->index, 0);
  EXPECT_EQ(ecc->xid, 0);
  EXPECT_TRUE(ecc->double_bit_ecc);

  const std::vector<GpuSample> samples = (*nvml)->Sample();
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].uncorrected_ecc_errors, 3);
  EXPECT_EQ(samples[0].retired_pages, 0);
  EXPECT_EQ(samples[1].retired_pages, 2);
  unsetenv("FAKE_NVML_CONTROL");
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
