#include "worker/gpu_discovery.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

constexpr char kFakeNvml[] = "worker/testing/libfake_nvml.so";

// Three GPUs of the fake NVML: index, UUID, total memory.
constexpr char kDevices[] =
    "GPU-aaaa1111:0:0:17179869184:0:0:0;"
    "GPU-bbbb2222:0:0:34359738368:0:0:0;"
    "GPU-bbbb3333:0:0:85899345920:0:0:0";

class GpuDiscoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("FAKE_NVML_DEVICES", kDevices, 1);
    auto nvml = Nvml::Load(testing::Runfile(kFakeNvml));
    ASSERT_OK(nvml) << nvml.status();
    nvml_ = *std::move(nvml);
  }

  std::vector<std::string> Uuids(const std::optional<std::string>& visible) {
    std::string why;
    std::vector<std::string> uuids;
    for (const v1::Gpu& gpu : DiscoverGpus(*nvml_, visible, &why)) uuids.push_back(gpu.uuid());
    if (uuids.empty()) uuids.push_back("none: " + why);
    return uuids;
  }

  std::unique_ptr<Nvml> nvml_;
};

TEST_F(GpuDiscoveryTest, ListsEveryNvmlDeviceWithItsIndexAndMemory) {
  std::string why;
  std::vector<v1::Gpu> gpus = DiscoverGpus(*nvml_, std::nullopt, &why);
  ASSERT_EQ(gpus.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(gpus[i].index(), i);
  EXPECT_EQ(gpus[0].uuid(), "GPU-aaaa1111");
  EXPECT_EQ(gpus[1].memory_total_bytes(), 34359738368);
  EXPECT_EQ(gpus[2].name(), "Fake GPU");
}

// The worker's own CUDA_VISIBLE_DEVICES (Slurm's, a container's) limits what
// it offers, read as CUDA reads it.
TEST_F(GpuDiscoveryTest, KeepsWhatTheWorkersCudaVisibleDevicesNames) {
  EXPECT_EQ(Uuids("2,0"), (std::vector<std::string>{"GPU-bbbb3333", "GPU-aaaa1111"}));
  EXPECT_EQ(Uuids("GPU-bbbb3,GPU-aaaa"),
            (std::vector<std::string>{"GPU-bbbb3333", "GPU-aaaa1111"}));
  // An unknown, ambiguous or repeated entry ends the list, as it does for CUDA.
  EXPECT_EQ(Uuids("1,7,0"), std::vector<std::string>{"GPU-bbbb2222"});
  EXPECT_EQ(Uuids("0,GPU-bbbb,2"), std::vector<std::string>{"GPU-aaaa1111"});
  EXPECT_EQ(Uuids("0,0"), std::vector<std::string>{"GPU-aaaa1111"});
  EXPECT_EQ(Uuids(""),
            std::vector<std::string>{"none: CUDA_VISIBLE_DEVICES=\"\" names none of the 3 GPUs "
                                     "NVML lists"});
}

// Discovery asks NVML only: no CUDA library is loaded, so no context exists.
TEST_F(GpuDiscoveryTest, LoadsNoCudaLibrary) {
  std::string why;
  ASSERT_EQ(DiscoverGpus(*nvml_, std::nullopt, &why).size(), 3u);
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  EXPECT_EQ(text.str().find("libcudart"), std::string::npos);
  EXPECT_EQ(text.str().find("libcuda.so"), std::string::npos);
}

TEST(VisibleDevicesTest, NamesTheRanksGpusByUuid) {
  std::vector<v1::Gpu> gpus(3);
  for (int i = 0; i < 3; ++i) {
    gpus[i].set_index(i + 4);  // the worker was limited to NVML's devices 4..6
    gpus[i].set_uuid("GPU-" + std::to_string(i + 4));
  }
  gpus[2].clear_uuid();
  EXPECT_EQ(*VisibleDevices(gpus, {6, 4}), "6,GPU-4");
  EXPECT_EQ(*VisibleDevices(gpus, {}), "");
  EXPECT_EQ(VisibleDevices(gpus, {1}).status().message(),
            "GPU 1 was assigned but this worker offers GPUs 4, 5, 6");
  EXPECT_EQ(VisibleDevices({}, {0}).status().message(),
            "GPU 0 was assigned but this worker offers none");
}

}  // namespace
}  // namespace ringmaster
