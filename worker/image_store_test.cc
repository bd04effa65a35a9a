#include "worker/image_store.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"

#include "testing/registry_server.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Bytes no compressor shrinks, so that an image's size is what it holds.
std::string Noise(size_t bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(bytes, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

TEST(PullErrorTest, EachFailureOfSkopeoHasTheCodeThatSaysWhetherToTryAgain) {
  auto error = [](const std::string& said) {
    ToolRun run;
    run.exit_code = 1;
    run.output = "time=\"...\" level=fatal msg=\"" + said + "\"\n";
    return PullError("registry.example:5000/team/train:1.2", run);
  };
  EXPECT_THAT(error("initializing source docker://x: reading manifest 1.2 in x: manifest unknown"),
              StatusIs(absl::StatusCode::kNotFound,
                       "pulling registry.example:5000/team/train:1.2: reading manifest 1.2 in x: "
                       "manifest unknown"));
  // A registry whose name does not resolve does not exist either.
  EXPECT_THAT(error("pinging container registry registry.example:5000: dial tcp: lookup "
                    "registry.example: no such host"),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(error("reading manifest: unauthorized: authentication required"),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(error("writing blob: no space left on device"),
              StatusIs(absl::StatusCode::kResourceExhausted));
  // One that does not answer now may later: worth trying again.
  EXPECT_THAT(error("dial tcp 10.0.0.1:5000: connect: connection refused"),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(error("dial tcp 10.0.0.1:5000: i/o timeout"),
              StatusIs(absl::StatusCode::kUnavailable));
}

class ImageStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::string why = testing::RegistryServer::Unavailable(); !why.empty()) {
      skip_ = why;
      return;
    }
    dir_ = new std::string(testing::MakeTempDir("image-store"));
    auto registry = testing::RegistryServer::Start(*dir_ + "/registry", "team", "secret");
    ASSERT_OK(registry);
    registry_ = registry->release();
    // Three images of about 4 MiB each, and one of about 12 MiB.
    for (const char* name : {"first", "second", "third"}) {
      ASSERT_OK(registry_->Push(std::string("team/") + name + ":1.0",
                                {{"/etc/os-release", std::string("PRETTY_NAME=\"") + name + "\"\n"},
                                 {"/data/noise", Noise(4 << 20, name[0])}}));
    }
    ASSERT_OK(registry_->Push("team/big:1.0", {{"/data/noise", Noise(12 << 20, 7)}}));
  }
  static void TearDownTestSuite() {
    delete registry_;
    registry_ = nullptr;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
  }

  ImageStoreOptions Options(int64_t limit = int64_t{1} << 30) {
    ImageStoreOptions options;
    options.dir = testing::MakeTempDir("images");
    options.auth_file = registry_->WriteAuthFile(options.dir + "-auth.json", "team", "secret");
    options.certs_dir = registry_->certs_dir();
    options.cache_limit_bytes = limit;
    return options;
  }
  ImageReference Ref(const std::string& name) {
    absl::StatusOr<ImageReference> ref = ParseImageReference(registry_->address() + "/" + name);
    EXPECT_OK(ref);
    return *ref;
  }

  static std::string skip_;
  static std::string* dir_;
  static testing::RegistryServer* registry_;
};

std::string ImageStoreTest::skip_;
std::string* ImageStoreTest::dir_ = nullptr;
testing::RegistryServer* ImageStoreTest::registry_ = nullptr;

TEST_F(ImageStoreTest, AnImageIsPulledOnceAndItsRootFilesystemIsTheImages) {
  ImageStoreOptions options = Options();
  auto store = ImageStore::Open(options);
  ASSERT_OK(store);
  std::vector<ImageStore::Progress> seen;
  absl::StatusOr<ImageStore::Held> held =
      (*store)->Acquire(Ref("team/first:1.0"), false, [&](const ImageStore::Progress& p) {
        seen.push_back(p);
        return true;
      });
  ASSERT_OK(held);
  EXPECT_EQ(Read(held->rootfs + "/etc/os-release"), "PRETTY_NAME=\"first\"\n");
  ASSERT_FALSE(seen.empty());
  EXPECT_GT(seen.back().total_bytes, 4 << 20) << "the manifest's layers";
  EXPECT_GE(seen.back().done_bytes, seen.back().total_bytes);
  EXPECT_EQ(held->reference, registry_->address() + "/team/first:1.0");
  EXPECT_THAT(held->digest, ::testing::StartsWith("sha256:"));
  std::vector<CachedImage> listed = (*store)->List();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].users, 1);
  EXPECT_GT(listed[0].bytes, 4 << 20);

  // Held again, from the cache: the registry is not asked (its
  // credentials are gone).
  std::filesystem::remove(options.auth_file);
  absl::StatusOr<ImageStore::Held> again = (*store)->Acquire(Ref("team/first:1.0"), false);
  ASSERT_OK(again);
  EXPECT_EQ(again->rootfs, held->rootfs);
  EXPECT_EQ((*store)->List()[0].users, 2);
  (*store)->Release(*held);
  (*store)->Release(*again);
  EXPECT_EQ((*store)->List()[0].users, 0);
  // `always` asks the registry again.
  EXPECT_THAT((*store)->Acquire(Ref("team/first:1.0"), true),
              StatusIs(absl::StatusCode::kPermissionDenied));

  // A worker started again finds its cache, and what a crash left beside
  // it (a pull, an unpack cut short, an image the index lost) is gone.
  store->reset();
  for (const char* left : {"/layouts/half-pulled/blobs", "/rootfs/0123abcd.half-unpacked/rootfs",
                           "/rootfs/89abcdef/rootfs"}) {
    std::filesystem::create_directories(options.dir + left);
  }
  auto reopened = ImageStore::Open(options);
  ASSERT_OK(reopened);
  ASSERT_EQ((*reopened)->List().size(), 1u);
  EXPECT_OK((*reopened)->Acquire(Ref("team/first:1.0"), false).status());
  EXPECT_TRUE(std::filesystem::is_empty(options.dir + "/layouts"));
  std::vector<std::string> unpacked;
  for (const auto& entry : std::filesystem::directory_iterator(options.dir + "/rootfs")) {
    unpacked.push_back(entry.path().string());
  }
  EXPECT_EQ(unpacked,
            std::vector<std::string>{std::filesystem::path(held->rootfs).parent_path().string()});
}

TEST_F(ImageStoreTest, AMissingImageATagAndRefusedCredentialsEachSaySo) {
  ImageStoreOptions options = Options();
  auto store = ImageStore::Open(options);
  ASSERT_OK(store);
  const std::string at = registry_->address();
  EXPECT_THAT((*store)->Acquire(Ref("team/first:9.9"), false),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("pulling " + at + "/team/first:9.9: reading manifest 9.9")));
  EXPECT_THAT((*store)->Acquire(Ref("team/nothere:1.0"), false),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr(at + "/team/nothere:1.0")));
  registry_->WriteAuthFile(options.auth_file, "team", "wrong");
  EXPECT_THAT((*store)->Acquire(Ref("team/first:1.0"), false),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("unauthorized")));
  absl::StatusOr<ImageReference> nowhere = ParseImageReference("127.0.0.1:1/team/first:1.0");
  ASSERT_OK(nowhere);
  EXPECT_THAT((*store)->Acquire(*nowhere, false),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("connection refused")));
  EXPECT_TRUE((*store)->List().empty()) << "nothing half-made is kept";
}

TEST_F(ImageStoreTest, APullOrAWaitForOneEndsWhenItsRankNoLongerWantsIt) {
  ImageStoreOptions options = Options();
  options.max_pulls = 1;
  auto store = ImageStore::Open(options);
  ASSERT_OK(store);
  // A pull told to stop ends, and leaves nothing behind.
  EXPECT_THAT((*store)->Acquire(Ref("team/big:1.0"), false,
                                [](const ImageStore::Progress&) { return false; }),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("team/big:1.0")));
  EXPECT_TRUE((*store)->List().empty());
  EXPECT_FALSE(std::filesystem::exists(options.dir + "/layouts") &&
               !std::filesystem::is_empty(options.dir + "/layouts"));
  // A rank waiting for another's pull of the image stops waiting.
  absl::Notification pulling, waiter_gone;
  std::thread first([&] {
    EXPECT_OK((*store)
                  ->Acquire(Ref("team/big:1.0"), false,
                            [&](const ImageStore::Progress&) {
                              if (!pulling.HasBeenNotified()) pulling.Notify();
                              waiter_gone.WaitForNotification();
                              return true;
                            })
                  .status());
  });
  pulling.WaitForNotification();
  ImageStore::Progress same, other;
  EXPECT_THAT((*store)->Acquire(Ref("team/big:1.0"), false,
                                [&](const ImageStore::Progress& p) {
                                  same = p;
                                  return false;
                                }),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("waiting for the pull")));
  EXPECT_FALSE(same.waiting_for_slot) << "it waits for the image's own pull";
  // Another image waits for the one pull slot, and says so.
  EXPECT_THAT((*store)->Acquire(Ref("team/first:1.0"), false,
                                [&](const ImageStore::Progress& p) {
                                  other = p;
                                  return false;
                                }),
              StatusIs(absl::StatusCode::kCancelled));
  EXPECT_TRUE(other.waiting_for_slot);
  waiter_gone.Notify();
  first.join();
  EXPECT_EQ((*store)->List().size(), 1u);
}

TEST_F(ImageStoreTest, TheLeastRecentlyUsedImageGoesAndOneInUseStays) {
  // Room for two of the small images, not three.
  const ImageStoreOptions options = Options(int64_t{10} << 20);
  auto store = ImageStore::Open(options);
  ASSERT_OK(store);
  absl::StatusOr<ImageStore::Held> first = (*store)->Acquire(Ref("team/first:1.0"), false);
  ASSERT_OK(first);
  absl::StatusOr<ImageStore::Held> second = (*store)->Acquire(Ref("team/second:1.0"), false);
  ASSERT_OK(second);
  (*store)->Release(*second);
  // first is older but in use: second goes.
  absl::StatusOr<ImageStore::Held> third = (*store)->Acquire(Ref("team/third:1.0"), false);
  ASSERT_OK(third);
  std::vector<std::string> names;
  for (const CachedImage& image : (*store)->List()) names.push_back(image.reference);
  const std::string at = registry_->address();
  EXPECT_EQ(names, (std::vector<std::string>{at + "/team/first:1.0", at + "/team/third:1.0"}));
  EXPECT_FALSE(std::filesystem::exists(second->rootfs));
  EXPECT_TRUE(std::filesystem::exists(first->rootfs + "/etc/os-release"));
  EXPECT_LE((*store)->bytes(), int64_t{10} << 20);
  // One larger than the whole cache is refused before a byte is pulled.
  EXPECT_THAT((*store)->Acquire(Ref("team/big:1.0"), false),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("its layers take 12 MiB, more than the worker's "
                                 "--image-cache-limit of 10 MiB")));
  EXPECT_TRUE(std::filesystem::is_empty(options.dir + "/layouts"));
  EXPECT_EQ((*store)->List().size(), 2u);
}

}  // namespace
}  // namespace ringmaster
