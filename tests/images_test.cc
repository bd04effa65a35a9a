// Jobs that bring their own environment: a local cluster whose workers run
// ranks of jobs with an image under runc, pulling from a real registry
// (Debian's docker-registry, with TLS and htpasswd) that the test starts,
// with images built by buildah.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <regex>

#include "absl/strings/str_cat.h"
#include "testing/registry_server.h"
#include "tests/cluster_fixture.h"
#include "tests/rank_attacks.h"

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
    // ./dev test installs every tool these need and runs as root: there a
    // skip would hide a missing piece, so it fails instead.
    if (!skip_.empty() && std::getenv("RINGMASTER_REQUIRE_IMAGE_TESTS") != nullptr) {
      FAIL() << "the image tests cannot run here: " << skip_;
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
    for (const char* applet : {"sh", "cat", "head", "echo", "id", "grep", "test", "kill", "ls",
                               "od", "readlink", "sleep", "true", "mkdir", "dd", "df"}) {
      files[std::string("/bin/") + applet + "*"] = "/bin/busybox";
    }
    ASSERT_OK(registry_->Push("team/busybox:1.0", files));
  }
  static void TearDownTestSuite() {
    delete registry_;
    registry_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    std::vector<std::string> args = {
        "--container-runtime", "runc",
        "--registry-auth",     registry_->WriteAuthFile(*dir_ + "/auth.json", "team", password_),
        "--registry-certs",    registry_->certs_dir()};
    up_args_.insert(up_args_.end(), args.begin(), args.end());
    ClusterTest::SetUp();
  }
  std::string Image(const std::string& name) { return registry_->address() + "/" + name; }

  std::string password_ = "secret";  // the workers' in --registry-auth
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

TEST_F(ImagesTest, EachWorkersCacheIsListedByTheCliAndAnImageRunsByItsDigest) {
  const std::string image = Image("team/busybox:1.0");
  const std::string id = Submit(
      absl::StrCat("name: cached\nranks: 1\nimage: ", image, "\ncommand: [sh, -c, 'true']\n"));
  WaitJob(id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  // The cache reaches the coordinator with the worker's heartbeats; one
  // sent before the rank let the image go still says it is in use.
  testing::CommandResult listed;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        listed = Cli({"images"});
        return listed.out.find(image) != std::string::npos &&
               listed.out.find(" ago") != std::string::npos;
      },
      absl::Seconds(30)))
      << "listed, no rank in it: " << listed.out << listed.err;
  EXPECT_NE(listed.out.find("WORKER"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("sha256:"), std::string::npos) << listed.out;
  const testing::CommandResult json = Cli({"images", "-o", "json"});
  EXPECT_NE(json.out.find(absl::StrCat("\"reference\": \"", image, "\"")), std::string::npos)
      << json.out;

  // The same image named by its digest, as the cache lists it.
  std::smatch digest;
  ASSERT_TRUE(
      std::regex_search(json.out, digest, std::regex("\"digest\": \"(sha256:[0-9a-f]{64})\"")))
      << json.out;
  const std::string by_digest = absl::StrCat(Image("team/busybox"), "@", digest[1].str());
  const std::string pinned =
      Submit(absl::StrCat("name: pinned\nranks: 1\nimage: ", by_digest,
                          "\ncommand: [sh, -c, 'head -1 /etc/os-release']\n"));
  const v1::Job job = WaitJob(pinned, [](const v1::Job& j) {
    return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED;
  });
  EXPECT_EQ(job.state(), v1::SUCCEEDED) << Cli({"status", pinned}).out;
  EXPECT_NE(Cli({"logs", pinned}).out.find("Ringmaster test image"), std::string::npos);
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

  const std::string missing = Image("team/nothere:1.0");
  const std::string image =
      Submit(absl::StrCat("name: no-image\nranks: 1\nmax_restarts: 3\nimage: ", missing,
                          "\ncommand: [sh, -c, 'true']\n"));
  job = WaitJob(image, [](const v1::Job& j) { return j.state() == v1::FAILED; });
  EXPECT_EQ(job.restarts(), 0);
  status = Cli({"status", image});
  EXPECT_NE(status.out.find(absl::StrCat("pulling ", missing)), std::string::npos) << status.out;
}

TEST_F(ImagesTest, AnUnreachableRegistryHoldsTheJobWaitingAndTriedAgain) {
  // Nothing listens on port 1: every pull is refused a connection.
  const std::string image = "127.0.0.1:1/team/busybox:1.0";
  const std::string id =
      Submit(absl::StrCat("name: unreachable\nranks: 1\nmax_restarts: 3\n",
                          "start_timeout_s: 2\nimage: ", image, "\ncommand: [sh, -c, 'true']\n"));
  // Tried again after 2 s, then 4 s: the job waits through its start
  // timeout, spending no restart.
  testing::CommandResult status;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        status = Cli({"status", id});
        return status.out.find("connection refused; trying again in 4s") != std::string::npos;
      },
      absl::Seconds(60)))
      << status.out << status.err;
  EXPECT_NE(status.out.find("pulling " + image), std::string::npos) << status.out;
  v1::Job job = WaitJob(id, [](const v1::Job&) { return true; });
  EXPECT_EQ(job.state(), v1::STARTING);
  EXPECT_EQ(job.restarts(), 0);
  // Cancelled, it ends at once: the wait ends with it.
  Cli({"cancel", id});
  job = WaitJob(id, [](const v1::Job& j) { return j.state() == v1::CANCELLED; });
  EXPECT_EQ(job.restarts(), 0);
}

TEST_F(ImagesTest, ACheckpointDirOnlyRootCanChangeIsBoundAndAnotherRefused) {
  // The local cluster's checkpoint root, the coordinator's default.
  const std::string root = state_dir_ + "/checkpoints";
  const std::string id = Submit(absl::StrCat(
      "name: ckpt\nranks: 1\ncheckpoint_dir: ", root, "\nimage: ", Image("team/busybox:1.0"),
      "\ncommand: [sh, -c, 'mkdir -p $RINGMASTER_CHECKPOINT_DIR && echo saved > "
      "$RINGMASTER_CHECKPOINT_DIR/state; id -u']\n"));
  v1::Job job = WaitJob(
      id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED; });
  ASSERT_EQ(job.state(), v1::SUCCEEDED) << Cli({"status", id}).out;
  struct stat st {};
  ASSERT_EQ(stat((root + "/" + id + "/state").c_str(), &st), 0)
      << "written through the bind: " << Cli({"logs", id}).out;
  const std::string logs = Cli({"logs", id}).out;
  EXPECT_NE(logs.find(absl::StrCat("[rank 0] ", st.st_uid, "\n")), std::string::npos)
      << "the file is the job's uid's: " << st.st_uid << " against " << logs;

  // A directory of another user's on the way: it could be swapped for a
  // link to anywhere, so it is not bound.
  fs::create_directories(root + "/theirs/ckpt");
  ASSERT_EQ(chown((root + "/theirs").c_str(), 65534, 65534), 0);
  const std::string refused = Submit(absl::StrCat(
      "name: ckpt-refused\nranks: 1\nmax_restarts: 3\ncheckpoint_dir: ", root,
      "/theirs/ckpt\nimage: ", Image("team/busybox:1.0"), "\ncommand: [sh, -c, 'true']\n"));
  job = WaitJob(refused, [](const v1::Job& j) { return j.state() == v1::FAILED; });
  EXPECT_EQ(job.restarts(), 0);
  const std::string status = Cli({"status", refused}).out;
  EXPECT_NE(status.find(root + "/theirs belongs to uid 65534"), std::string::npos) << status;
}

TEST_F(ImagesTest, ARanksMemoryLimitHoldsInItsImageAndItsKillIsNamed) {
  // dd fills a buffer of 256 MiB: four times the rank's limit.
  const std::string id = Submit(absl::StrCat(
      "name: hungry\nranks: 1\nmax_restarts: 0\nresources: {memory_mb: 64}\nimage: ",
      Image("team/busybox:1.0"),
      "\ncommand: [sh, -c, 'echo eating; exec dd if=/dev/zero of=/dev/null bs=256M count=1']\n"));
  const v1::Job job = WaitJob(
      id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED; });
  const std::string logs = Cli({"logs", id}).out;
  ASSERT_EQ(job.state(), v1::FAILED) << "256 MiB were given within a limit of 64: " << logs;
  EXPECT_NE(logs.find("eating"), std::string::npos) << logs;
  EXPECT_EQ(job.history(job.history_size() - 1).reason(), v1::RANK_OOM) << job.ShortDebugString();
  const std::string status = Cli({"status", id}).out;
  EXPECT_NE(status.find("rank 0 was killed for exceeding its memory limit"), std::string::npos)
      << status;
}

// One worker of three slots, whose ranks run as its own user: a job in an
// image still gets a /dev/shm of its own.
class ImagesOneWorkerTest : public ImagesTest {
 protected:
  void SetUp() override {
    up_workers_ = 1;
    up_slots_ = 3;
    ImagesTest::SetUp();
  }
};

TEST_F(ImagesOneWorkerTest, AJobsRanksShareItsShmWhichNoOtherJobSees) {
  const std::string pair = Submit(absl::StrCat(
      "name: pair\nranks: 2\nmax_restarts: 0\nimage: ", Image("team/busybox:1.0"),
      "\ncommand: [sh, -c, 'if [ $RANK = 0 ]; then echo from-rank-0 > /dev/shm/pair-file; else "
      "while [ ! -s /dev/shm/pair-file ]; do sleep 0.1; done; cat /dev/shm/pair-file; "
      "df -k /dev/shm; fi; exec sleep 300']\n"));
  std::string logs;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        logs = Cli({"logs", pair, "--rank", "1"}).out;
        return logs.find("/dev/shm\n") != std::string::npos;
      },
      absl::Seconds(60)))
      << "rank 1 never read rank 0's file: " << logs;
  EXPECT_NE(logs.find("from-rank-0"), std::string::npos) << logs;
  // The job's tmpfs, sized as --shm-size-mb says (by default half the
  // machine's memory), not a container's own of 64 MiB.
  std::smatch size;
  ASSERT_TRUE(
      std::regex_search(logs, size, std::regex("([0-9]+) +[0-9]+ +[0-9]+ +[0-9]+% /dev/shm")))
      << logs;
  EXPECT_GT(std::stoll(size[1]), 65536) << logs;
  EXPECT_FALSE(fs::exists("/dev/shm/pair-file")) << "written in the host's /dev/shm";

  const std::string other =
      Submit(absl::StrCat("name: other\nranks: 1\nimage: ", Image("team/busybox:1.0"),
                          "\ncommand: [sh, -c, 'ls -A /dev/shm; echo listed']\n"));
  ASSERT_EQ(WaitJob(other,
                    [](const v1::Job& j) {
                      return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED;
                    })
                .state(),
            v1::SUCCEEDED);
  const std::string listed = Cli({"logs", other}).out;
  EXPECT_NE(listed.find("listed"), std::string::npos) << listed;
  EXPECT_EQ(listed.find("pair-file"), std::string::npos) << "another job's file shows: " << listed;

  // Gone with the job's last rank here.
  Cli({"cancel", pair});
  const std::string shm = absl::StrCat(state_dir_, "/worker-0/shm/", pair);
  EXPECT_TRUE(testing::WaitFor([&] { return !fs::exists(shm); }, absl::Seconds(30))) << shm;
}

// Workers with a GPU each (the fake NVML of worker/testing) and a CDI spec
// for it, as the NVIDIA container toolkit writes one: a device node, a
// driver library bound in, environment, a hook the runtime runs.
class ImagesGpuTest : public ImagesTest {
 protected:
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    cdi_ = testing::MakeTempDir("cdi");
    std::ofstream(cdi_ + "/libcuda-fake.so.1") << "a fake driver\n";
    std::ofstream(cdi_ + "/fake-gpu.yaml") << absl::StrCat(
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n"
        "- name: GPU-aaaa\n  containerEdits:\n    deviceNodes:\n"
        "    - {path: /dev/nvidia-fake0, hostPath: /dev/zero}\n"
        "containerEdits:\n  env: [FAKE_DRIVER=loaded]\n  mounts:\n"
        "  - {hostPath: ",
        cdi_,
        "/libcuda-fake.so.1, containerPath: /usr/lib/libcuda-fake.so.1, "
        "options: [ro, nosuid, nodev, bind]}\n"
        "  hooks:\n  - {hookName: createContainer, path: /bin/sh, args: [sh, -c, 'touch ",
        cdi_, "/hook-ran']}\n");
    chmod((cdi_ + "/fake-gpu.yaml").c_str(), 0644);
    extra_env_["RINGMASTER_NVML_LIBRARY"] = testing::Runfile("worker/testing/libfake_nvml.so");
    extra_env_["FAKE_NVML_DEVICES"] = "GPU-aaaa:0:0:17179869184:0:0:0";
    extra_env_["RINGMASTER_CDI_SPEC_DIRS"] = cdi_;
    up_workers_ = 1;
    ImagesTest::SetUp();
  }
  std::string cdi_;
};

TEST_F(ImagesGpuTest, ARanksGpuReachesItsContainerAsItsCdiSpecSays) {
  const std::string id = Submit(absl::StrCat(
      "name: gpu-in-image\nranks: 1\ngpus_per_rank: 1\nimage: ", Image("team/busybox:1.0"),
      "\ncommand: [sh, -c, 'head -c 4 /dev/nvidia-fake0 | od -An -tx1; "
      "cat /usr/lib/libcuda-fake.so.1; echo driver=$FAKE_DRIVER gpus=$CUDA_VISIBLE_DEVICES']\n"));
  const v1::Job job = WaitJob(
      id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED; });
  const testing::CommandResult logs = Cli({"logs", id});
  ASSERT_EQ(job.state(), v1::SUCCEEDED) << logs.out << job.ShortDebugString();
  EXPECT_NE(logs.out.find("00 00 00 00"), std::string::npos) << "the device node: " << logs.out;
  EXPECT_NE(logs.out.find("a fake driver"), std::string::npos) << "the library: " << logs.out;
  EXPECT_NE(logs.out.find("driver=loaded gpus=GPU-aaaa"), std::string::npos) << logs.out;
  EXPECT_TRUE(fs::exists(cdi_ + "/hook-ran")) << "the spec's hook";
}

// Debian's minimal base with python3, as ./dev test makes it.
constexpr char kPythonRootfs[] = "/var/cache/ringmaster-test/rootfs/python";

// An image with Python: the DDP hook and the start-up hook that takes a
// hung rank's stacks are mounted in.
class ImagesPythonTest : public ImagesTest {
 protected:
  static void SetUpTestSuite() {
    ImagesTest::SetUpTestSuite();
    if (!skip_.empty()) return;
    if (!fs::exists(std::string(kPythonRootfs) + "/usr/bin/python3")) {
      python_skip_ = absl::StrCat("no ", kPythonRootfs, " (./dev test makes it with debootstrap)");
      if (std::getenv("RINGMASTER_REQUIRE_IMAGE_TESTS") != nullptr) FAIL() << python_skip_;
      return;
    }
    // Debian's own os-release, as the host's may be: one line changed
    // tells the image's from the host's.
    std::ifstream in(std::string(kPythonRootfs) + "/etc/os-release");
    std::string release = "PRETTY_NAME=\"Ringmaster python test image\"\n";
    for (std::string line; std::getline(in, line);) {
      if (!absl::StartsWith(line, "PRETTY_NAME=")) absl::StrAppend(&release, line, "\n");
    }
    ASSERT_OK(
        registry_->PushRootfs("team/python:3.11", kPythonRootfs, {{"/etc/os-release", release}}));
  }
  void SetUp() override {
    if (!python_skip_.empty()) GTEST_SKIP() << python_skip_;
    ImagesTest::SetUp();
  }
  static std::string python_skip_;
};

std::string ImagesPythonTest::python_skip_;

TEST_F(ImagesPythonTest, AHungRanksStacksInAnImageReachItsLog) {
  const std::string id = Submit(absl::StrCat(
      "name: hung\nranks: 1\nimage: ", Image("team/python:3.11"),
      "\ncommand:\n  - python3\n  - -c\n  - |\n    import time\n"
      "    def wait_for_a_peer_that_never_comes():\n        print('waiting', flush=True)\n"
      "        time.sleep(600)\n    wait_for_a_peer_that_never_comes()\n"));
  WaitJob(id, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  testing::CommandResult logs;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        logs = Cli({"logs", id});
        return logs.out.find("waiting") != std::string::npos;
      },
      absl::Seconds(60)))
      << logs.out << logs.err;
  const testing::CommandResult stacks = Cli({"stacks", id});
  EXPECT_EQ(stacks.exit_code, 0) << stacks.out << stacks.err;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        logs = Cli({"logs", id});
        return logs.out.find("wait_for_a_peer_that_never_comes") != std::string::npos;
      },
      absl::Seconds(60)))
      << stacks.out << logs.out;
  EXPECT_NE(logs.out.find("----- ringmaster: stacks of rank 0"), std::string::npos) << logs.out;
  // The command's own process, from the host: eu-stack read its threads.
  EXPECT_NE(logs.out.find("native stacks:\n[rank 0] PID "), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("clock_nanosleep"), std::string::npos) << logs.out;
  std::cout << "the stacks as the log has them:\n" << logs.out << std::endl;
  Cli({"cancel", id});
}

// The Python image with a uid per job, as a shared cluster runs: what a
// rank writes on shared storage is its job's uid's, in an image as on the
// host, and so is the error file it leaves.
class ImagesPythonUidTest : public ImagesPythonTest {
 protected:
  void SetUp() override {
    up_args_ = {"--rank-uid-range", "300000-300999"};
    state_parent_ = "/tmp";
    ImagesPythonTest::SetUp();
  }
};

TEST_F(ImagesPythonUidTest, RanksPrintTheImagesOsReleaseAndWriteCheckpointsAsTheJobsUid) {
  const std::string root = state_dir_ + "/checkpoints";
  // The spec names no image: submit --image gives it.
  const std::string spec =
      WriteSpec("os-release",
                absl::StrCat("name: os-release\nranks: 2\ncheckpoint_dir: ", root,
                             "\ncommand:\n  - python3\n  - -c\n  - |\n"
                             "    import os\n"
                             "    print(open('/etc/os-release').readline().strip())\n"
                             "    d = os.environ['RINGMASTER_CHECKPOINT_DIR']\n"
                             "    os.makedirs(d, exist_ok=True)\n"
                             "    open(f\"{d}/rank-{os.environ['RANK']}\", 'w').write('saved')\n"
                             "    print('rank', os.environ['RANK'], 'of', "
                             "os.environ['WORLD_SIZE'], 'uid', os.getuid())\n"));
  const testing::CommandResult submitted =
      Cli({"submit", "--image", Image("team/python:3.11"), spec});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::string id(absl::StripAsciiWhitespace(submitted.out));
  const v1::Job job = WaitJob(
      id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED; });
  ASSERT_EQ(job.state(), v1::SUCCEEDED) << Cli({"status", id}).out << Cli({"logs", id}).out;
  EXPECT_EQ(job.spec().image(), Image("team/python:3.11"));
  std::ifstream host_release("/etc/os-release");
  std::string host_line;
  std::getline(host_release, host_line);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string logs = Cli({"logs", id, "--rank", std::to_string(rank)}).out;
    EXPECT_NE(logs.find("PRETTY_NAME=\"Ringmaster python test image\""), std::string::npos) << logs;
    EXPECT_EQ(logs.find(host_line), std::string::npos) << "the host's os-release: " << logs;
    std::smatch uid;
    ASSERT_TRUE(
        std::regex_search(logs, uid, std::regex(absl::StrCat("rank ", rank, " of 2 uid ([0-9]+)"))))
        << logs;
    struct stat st {};
    const std::string file = absl::StrCat(root, "/", id, "/rank-", rank);
    ASSERT_EQ(stat(file.c_str(), &st), 0) << file;
    EXPECT_EQ(std::to_string(st.st_uid), uid[1].str()) << file << " is not the rank's uid's";
    EXPECT_GE(st.st_uid, 300000u) << "not a uid of the job's, from --rank-uid-range";
    EXPECT_LE(st.st_uid, 300999u);
  }
}

TEST_F(ImagesPythonUidTest, TheErrorFileARankInAnImageLeavesIsTheJobsRootCause) {
  // What torchrun's @record writes, written by hand: the image has no
  // torch.
  const std::string id = Submit(absl::StrCat(
      "name: raises\nranks: 1\nmax_restarts: 0\nimage: ", Image("team/python:3.11"),
      "\ncommand:\n  - python3\n  - -c\n  - |\n    import json, os\n"
      "    error = {'message': {'message': 'ValueError: bad input in the image',\n"
      "                         'extraInfo': {'py_callstack': '', 'timestamp': '0'}}}\n"
      "    json.dump(error, open(os.environ['TORCHELASTIC_ERROR_FILE'], 'w'))\n"
      "    raise SystemExit(1)\n"));
  const v1::Job job = WaitJob(id, [](const v1::Job& j) { return j.state() == v1::FAILED; });
  ASSERT_TRUE(job.has_root_cause()) << job.ShortDebugString();
  EXPECT_EQ(job.root_cause().error(), "ValueError: bad input in the image");
  EXPECT_EQ(job.root_cause().rank(), 0);
  const std::string status = Cli({"status", id}).out;
  EXPECT_NE(status.find("root cause: ValueError: bad input in the image"), std::string::npos)
      << status;
}

// A worker whose image cache sits on a disk of 16 MiB: the Python image
// cannot fit.
class ImagesPythonFullDiskTest : public ImagesPythonTest {
 protected:
  void SetUp() override {
    up_workers_ = 1;
    ImagesPythonTest::SetUp();
  }
  void BeforeUp() override {
    images_dir_ = state_dir_ + "/worker-0/images";
    fs::create_directories(images_dir_);
    const testing::CommandResult mounted =
        testing::Shell(absl::StrCat("mount -t tmpfs -o size=16m ringmaster-test ", images_dir_));
    ASSERT_EQ(mounted.exit_code, 0) << mounted.err;
  }
  void TearDown() override {
    ImagesPythonTest::TearDown();
    if (!images_dir_.empty()) testing::Shell(absl::StrCat("umount -l ", images_dir_));
  }
  std::string images_dir_;
};

TEST_F(ImagesPythonFullDiskTest, AnImageTheDiskCannotHoldFailsTheJobAtOnceNamingIt) {
  const std::string image = Image("team/python:3.11");
  const std::string id =
      Submit(absl::StrCat("name: too-big\nranks: 1\nmax_restarts: 3\nimage: ", image,
                          "\ncommand: [python3, -c, pass]\n"));
  const v1::Job job = WaitJob(id, [](const v1::Job& j) { return j.state() == v1::FAILED; });
  EXPECT_EQ(job.restarts(), 0) << "no restart spent";
  const std::string status = Cli({"status", id}).out;
  EXPECT_NE(status.find(absl::StrCat("pulling ", image, ": its layers take ")), std::string::npos)
      << status;
  EXPECT_NE(status.find(absl::StrCat(images_dir_, " has ")), std::string::npos) << status;
  EXPECT_NE(status.find("MiB free, less than twice that"), std::string::npos) << status;
}

// One worker of two slots whose image cache holds 18 MiB: two of the
// images below (6.8 MiB unpacked each) and not three.
class ImagesCacheTest : public ImagesTest {
 protected:
  void SetUp() override {
    up_workers_ = 1;
    up_slots_ = 2;
    up_args_ = {"--image-cache-limit", "18MiB"};
    ImagesTest::SetUp();
  }
  // busybox (twice: as itself and as sh) and 3 MiB that do not compress,
  // different in each image.
  std::string PushSized(const std::string& tag) {
    std::mt19937_64 random(std::hash<std::string>()(tag));
    std::string payload(3 << 20, '\0');
    for (char& c : payload) c = static_cast<char>(random());
    const std::string name = "team/cache:" + tag;
    EXPECT_OK(registry_->Push(
        name,
        {{"/bin/busybox*", "/bin/busybox"}, {"/bin/sh*", "/bin/busybox"}, {"/payload", payload}}));
    return Image(name);
  }
  bool Succeeds(const std::string& name, const std::string& image) {
    const std::string id = Submit(absl::StrCat("name: ", name, "\nranks: 1\nimage: ", image,
                                               "\ncommand: [sh, -c, 'true']\n"));
    return WaitJob(id, [](const v1::Job& j) {
             return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED;
           }).state() == v1::SUCCEEDED;
  }
};

TEST_F(ImagesCacheTest, TheLeastRecentlyUsedImageIsPrunedAndNeverOneARankRunsIn) {
  const std::string held = PushSized("held"), used = PushSized("used"), last = PushSized("last");
  // The oldest image in the cache, and in use throughout.
  const std::string holder = Submit(absl::StrCat("name: holder\nranks: 1\nimage: ", held,
                                                 "\ncommand: [busybox, sleep, '300']\n"));
  WaitJob(holder, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  ASSERT_TRUE(Succeeds("used", used));
  ASSERT_TRUE(Succeeds("last", last));  // over 18 MiB: one image must go
  testing::CommandResult listed;
  const bool pruned = testing::WaitFor(
      [&] {
        listed = Cli({"images"});
        return listed.out.find(last) != std::string::npos &&
               listed.out.find(used) == std::string::npos;
      },
      absl::Seconds(30));
  EXPECT_TRUE(pruned) << "the unused image stays: " << listed.out << listed.err;
  EXPECT_NE(listed.out.find(held), std::string::npos)
      << "the image a rank runs in was pruned: " << listed.out;
  EXPECT_EQ(WaitJob(holder, [](const v1::Job&) { return true; }).state(), v1::RUNNING);
  // Wanted again, the pruned image is pulled again.
  EXPECT_TRUE(Succeeds("used-again", used));
}

// Workers whose --registry-auth the registry refuses.
class ImagesWrongCredentialsTest : public ImagesTest {
 protected:
  void SetUp() override {
    password_ = "wrong";
    ImagesTest::SetUp();
  }
};

TEST_F(ImagesWrongCredentialsTest, RefusedCredentialsFailTheJobAtOnceNamingTheImage) {
  const std::string image = Image("team/busybox:1.0");
  const std::string id = Submit(absl::StrCat(
      "name: refused\nranks: 1\nmax_restarts: 3\nimage: ", image, "\ncommand: [sh, -c, 'true']\n"));
  const v1::Job job = WaitJob(id, [](const v1::Job& j) { return j.state() == v1::FAILED; });
  EXPECT_EQ(job.restarts(), 0) << "no restart spent";
  const testing::CommandResult status = Cli({"status", id});
  EXPECT_NE(status.out.find(absl::StrCat("pulling ", image)), std::string::npos)
      << status.out << status.err;
  EXPECT_NE(status.out.find("unauthorized"), std::string::npos) << status.out << status.err;
}

// One worker, a uid per job: a job in an image attacks a job on the host.
class ImagesIsolationTest : public ImagesTest {
 protected:
  void SetUp() override {
    up_args_ = {"--rank-uid-range", "300000-300999"};
    state_parent_ = "/tmp";
    up_workers_ = 1;
    up_slots_ = 2;
    ImagesTest::SetUp();
  }
};

TEST_F(ImagesIsolationTest, AHostileJobInAnImageIsRefusedEveryAttack) {
  const std::string victim = Submit(
      "name: victim\nranks: 1\nmax_restarts: 0\ncommand: [sh, -c, 'echo up; exec sleep 300']\n");
  const v1::Job running =
      WaitJob(victim, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  const std::string victim_dir = absl::StrCat(state_dir_, "/worker-0/jobs/", victim);
  // What the attacks aim at is there on the host: a refusal is the
  // container's doing. (The victim ships no code: its home stands for it.)
  ASSERT_TRUE(fs::exists(absl::StrCat("/proc/", running.ranks(0).pid(), "/environ")));
  ASSERT_TRUE(fs::is_directory(victim_dir + "/home"));
  ASSERT_TRUE(fs::is_directory(victim_dir + "/rank-0.error"));
  const std::string attacker = Submit(absl::StrCat(
      "name: attacker\nranks: 1\nimage: ", Image("team/busybox:1.0"), "\nenv:\n  VICTIM_PID: '",
      running.ranks(0).pid(), "'\n  VICTIM_CODE: ", victim_dir, "/home\n  VICTIM_ERROR_FILE: ",
      victim_dir, "/rank-0.error/error.json\n", RankAttacksCommand()));
  WaitJob(attacker,
          [](const v1::Job& j) { return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED; });
  const testing::CommandResult logs = Cli({"logs", attacker});
  ASSERT_NE(logs.out.find("ATTACKS DONE"), std::string::npos) << logs.out << logs.err;
  const std::map<std::string, std::string> verdicts = RankAttackVerdicts(logs.out);
  for (const std::string& name : RankAttackControls()) {
    ASSERT_EQ(verdicts.count(name), 1u) << name << " did not run";
    EXPECT_EQ(verdicts.at(name), "done") << name << ": the attacker's tools are missing";
  }
  for (const std::string& name : RankAttackNames()) {
    ASSERT_EQ(verdicts.count(name), 1u) << name << " did not run";
    EXPECT_EQ(verdicts.at(name), "refused") << name;
  }
  EXPECT_FALSE(fs::exists(victim_dir + "/home/evil"));
  EXPECT_FALSE(fs::exists(victim_dir + "/rank-0.error/error.json"));
  EXPECT_EQ(WaitJob(victim, [](const v1::Job&) { return true; }).state(), v1::RUNNING)
      << "the victim runs on";
}

}  // namespace
}  // namespace ringmaster
