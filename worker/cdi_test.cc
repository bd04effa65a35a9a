#include "worker/cdi.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;

// As `nvidia-ctk cdi generate` writes it, cut down to two GPUs.
constexpr char kNvidiaSpec[] = R"(cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
- name: GPU-aaaa
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
- name: GPU-bbbb
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia1
containerEdits:
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  deviceNodes:
  - path: /dev/nvidiactl
  - path: /dev/nvidia-uvm
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-ctk
    args: [nvidia-ctk, hook, update-ldcache, --folder, /usr/lib/x86_64-linux-gnu]
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05
    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05
    options: [ro, nosuid, nodev, bind]
)";

class CdiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: only root's specs are read";
    dir_ = testing::MakeTempDir("cdi");
  }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    chmod(path.c_str(), 0644);
    return path;
  }
  std::string dir_;
};

TEST_F(CdiTest, AGpusEditsAreItsOwnAndTheSpecsOnce) {
  Write("nvidia.yaml", kNvidiaSpec);
  ASSERT_OK_AND_ASSIGN(ContainerEdits edits,
                       CdiEdits({"/nonexistent", dir_}, {"nvidia.com/gpu=GPU-bbbb"}));
  std::vector<std::string> nodes;
  for (const DeviceNode& node : edits.device_nodes) nodes.push_back(node.path);
  EXPECT_EQ(nodes, (std::vector<std::string>{"/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"}));
  ASSERT_EQ(edits.mounts.size(), 1u);
  EXPECT_EQ(edits.mounts[0].destination, "/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05");
  EXPECT_TRUE(edits.mounts[0].read_only);
  EXPECT_EQ(edits.env, (std::map<std::string, std::string>{{"NVIDIA_VISIBLE_DEVICES", "void"}}));
  ASSERT_EQ(edits.hooks.size(), 1u);
  EXPECT_EQ(edits.hooks[0].hook, "createContainer");
  EXPECT_EQ(edits.hooks[0].args[2], "update-ldcache");

  // Two GPUs of one spec: the spec's edits once.
  ASSERT_OK_AND_ASSIGN(edits,
                       CdiEdits({dir_}, {"nvidia.com/gpu=GPU-aaaa", "nvidia.com/gpu=GPU-bbbb"}));
  EXPECT_EQ(edits.device_nodes.size(), 4u);
  EXPECT_EQ(edits.mounts.size(), 1u);
}

TEST_F(CdiTest, AJsonSpecIsReadToo) {
  Write("fake.json", R"({"cdiVersion": "0.6.0", "kind": "example.com/gpu", "devices": [
      {"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/gpu0",
                                                        "hostPath": "/dev/zero"}]}}]})");
  ASSERT_OK_AND_ASSIGN(ContainerEdits edits, CdiEdits({dir_}, {"example.com/gpu=0"}));
  ASSERT_EQ(edits.device_nodes.size(), 1u);
  EXPECT_EQ(edits.device_nodes[0].path, "/dev/gpu0");
  EXPECT_EQ(edits.device_nodes[0].host_path, "/dev/zero");
}

TEST_F(CdiTest, AMissingDeviceOrASpecOthersMayWriteIsNotUsed) {
  EXPECT_THAT(CdiEdits({dir_}, {"nvidia.com/gpu=GPU-aaaa"}),
              StatusIs(absl::StatusCode::kNotFound,
                       "no CDI spec in " + dir_ + " names nvidia.com/gpu=GPU-aaaa"));
  // A link is not followed, though what it names is root's.
  const std::string elsewhere = testing::MakeTempDir("cdi-elsewhere") + "/nvidia.yaml";
  std::ofstream(elsewhere) << kNvidiaSpec;
  chmod(elsewhere.c_str(), 0644);
  std::filesystem::create_symlink(elsewhere, dir_ + "/linked.yaml");
  EXPECT_THAT(CdiEdits({dir_}, {"nvidia.com/gpu=GPU-aaaa"}), StatusIs(absl::StatusCode::kNotFound));
  std::filesystem::remove(dir_ + "/linked.yaml");
  const std::string path = Write("nvidia.yaml", kNvidiaSpec);
  chmod(path.c_str(), 0666);  // anyone's hooks would run as root
  EXPECT_THAT(CdiEdits({dir_}, {"nvidia.com/gpu=GPU-aaaa"}), StatusIs(absl::StatusCode::kNotFound));
  chmod(path.c_str(), 0644);
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  EXPECT_THAT(CdiEdits({dir_}, {"nvidia.com/gpu=GPU-aaaa"}), StatusIs(absl::StatusCode::kNotFound));
  Write("broken.yaml", "kind: [unclosed");
  EXPECT_THAT(CdiEdits({dir_}, {"nvidia.com/gpu=GPU-aaaa"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("broken.yaml")));
}

}  // namespace
}  // namespace ringmaster
