// Jobs that bring their own environment: a local cluster whose workers run
// ranks of jobs with an image under runc, pulling from a real registry
// (Debian's docker-registry, with TLS and htpasswd) that the test starts,
// with images built by buildah.
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "testing/registry_server.h"
#include "tests/cluster_fixture.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

class ImagesTest : public ClusterTest {
 protected:
  static void SetUpTestSuite() {
    skip_ = testing::RegistryServer::Unavailable();
    if (skip_.empty() && geteuid() != 0) skip_ = "needs root (runc)";
    if (skip_.empty() && !fs::exists("/bin/busybox")) {
      skip_ = "no /bin/busybox (Debian's busybox-static)";
    }
    for (const char* tool : {"runc", "curl"}) {
      if (skip_.empty() && testing::Shell(absl::StrCat("command -v ", tool)).exit_code != 0) {
        skip_ = absl::StrCat(tool, " is not installed (./dev installs it)");
      }
    }
    if (!skip_.empty()) return;
    dir_ = new std::string(testing::MakeTempDir("images"));
    auto registry = testing::RegistryServer::Start(*dir_ + "/registry", "team", "secret");
    ASSERT_OK(registry);
    registry_ = registry->release();
    // A busybox image whose os-release is not the host's.
    std::map<std::string, std::string> files = {
        {"/bin/busybox*", "/bin/busybox"},
        {"/etc/os-release", "PRETTY_NAME=\"Ringmaster test image\"\n"}};
    for (const char* applet : {"sh", "cat", "head", "echo", "id"}) {
      files[std::string("/bin/") + applet + "*"] = "/bin/busybox";
    }
    ASSERT_OK(registry_->Push("team/busybox:1.0", files));
  }
  static void TearDownTestSuite() {
    delete registry_;
    registry_ = nullptr;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    up_args_ = {
        "--container-runtime", "runc",
        "--registry-auth",     registry_->WriteAuthFile(*dir_ + "/auth.json", "team", "secret"),
        "--registry-certs",    registry_->certs_dir()};
    ClusterTest::SetUp();
  }
  std::string Image(const std::string& name) { return registry_->address() + "/" + name; }

  static std::string skip_;
  static std::string* dir_;
  static testing::RegistryServer* registry_;
};

std::string ImagesTest::skip_;
std::string* ImagesTest::dir_ = nullptr;
testing::RegistryServer* ImagesTest::registry_ = nullptr;

TEST_F(ImagesTest, RanksPrintTheImagesOsReleaseNotTheHosts) {
  const std::string id = Submit(absl::StrCat(
      "name: in-image\nranks: 2\nimage: ", Image("team/busybox:1.0"),
      "\ncommand: [sh, -c, 'head -1 /etc/os-release; echo rank $RANK of $WORLD_SIZE']\n"));
  v1::Job job = WaitJob(
      id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED; });
  ASSERT_EQ(job.state(), v1::SUCCEEDED) << job.ShortDebugString();
  for (int rank = 0; rank < 2; ++rank) {
    testing::CommandResult logs = Cli({"logs", id, "--rank", std::to_string(rank)});
    EXPECT_NE(logs.out.find("PRETTY_NAME=\"Ringmaster test image\""), std::string::npos)
        << logs.out << logs.err;
    EXPECT_NE(logs.out.find(absl::StrCat("rank ", rank, " of 2")), std::string::npos) << logs.out;
  }
}

TEST_F(ImagesTest, AMissingTagOrCommandFailsTheJobAtOnceNamingIt) {
  const std::string tag = Image("team/busybox:9.9");
  const std::string id = Submit(absl::StrCat(
      "name: no-tag\nranks: 1\nmax_restarts: 3\nimage: ", tag, "\ncommand: [sh, -c, 'true']\n"));
  v1::Job job = WaitJob(id, [](const v1::Job& j) { return j.state() == v1::FAILED; });
  EXPECT_EQ(job.restarts(), 0) << "no restart spent";
  testing::CommandResult status = Cli({"status", id});
  EXPECT_NE(status.out.find(absl::StrCat("pulling ", tag, ": reading manifest 9.9")),
            std::string::npos)
      << status.out;

  const std::string command = Submit(absl::StrCat(
      "name: no-command\nranks: 1\nmax_restarts: 3\nimage: ", Image("team/busybox:1.0"),
      "\ncommand: [python3, train.py]\n"));
  job = WaitJob(command, [](const v1::Job& j) { return j.state() == v1::FAILED; });
  EXPECT_EQ(job.restarts(), 0);
  status = Cli({"status", command});
  EXPECT_NE(status.out.find(absl::StrCat("the command python3 is not in the image ",
                                         Image("team/busybox:1.0"))),
            std::string::npos)
      << status.out;
}

}  // namespace
}  // namespace ringmaster
