#include "worker/job_code.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "common/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string Sha256Of(const std::string& bytes) {
  Sha256 hash;
  hash.Update(bytes);
  return hash.HexDigest();
}

class JobCodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "job_code_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    tmp_ = pattern;
    archive_ = tmp_ + "/code.tar.gz";
    std::ofstream(tmp_ + "/train.py") << "print('hi')\n";
    auto writer = ArchiveWriter::Create(archive_);
    ASSERT_OK(writer);
    ASSERT_OK((*writer)->AddFile("train.py", tmp_ + "/train.py", 12, false));
    ASSERT_OK((*writer)->Finish());
    code_.set_sha256(*Sha256OfFile(archive_));
    code_.set_source("laptop:/home/me/project");
  }
  void TearDown() override { fs::remove_all(tmp_); }

  // A coordinator that serves `archive_` (or other bytes) and counts fetches.
  JobCode::Fetch Serving(std::string* bytes_instead = nullptr) {
    return [this, bytes_instead](const std::string& sha256, const std::string& path) {
      ++fetches_;
      if (sha256 != code_.sha256()) return absl::NotFoundError("no such archive");
      if (bytes_instead != nullptr) {
        std::ofstream(path) << *bytes_instead;
      } else {
        fs::copy_file(archive_, path);
      }
      return absl::OkStatus();
    };
  }

  std::string root() const { return tmp_ + "/jobs"; }

  std::string tmp_;
  std::string archive_;
  v1::CodePackage code_;
  std::atomic<int> fetches_{0};
};

TEST_F(JobCodeTest, FetchedOnceAndUnpackedForTheJob) {
  JobCode jobs(root(), UnpackLimits{}, Serving());
  auto dir = jobs.Prepare("train-1", code_, std::nullopt);
  ASSERT_OK(dir) << dir.status();
  EXPECT_EQ(*dir, root() + "/train-1/code");
  std::ifstream in(*dir + "/train.py");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "print('hi')\n");
  ASSERT_OK(jobs.Prepare("train-1", code_, std::nullopt));
  EXPECT_EQ(fetches_, 1);
  // Nothing of the download is left beside it.
  EXPECT_FALSE(fs::exists(root() + "/train-1/code.tar.gz.part"));
  EXPECT_FALSE(fs::exists(root() + "/train-1/code.part"));
}

TEST_F(JobCodeTest, RanksStartingTogetherWaitForOneFetch) {
  JobCode jobs(root(), UnpackLimits{}, Serving());
  std::vector<std::thread> ranks;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    ranks.emplace_back([&] { ok += jobs.Prepare("train-1", code_, std::nullopt).ok() ? 1 : 0; });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(ok, 8);
  EXPECT_EQ(fetches_, 1);
}

TEST_F(JobCodeTest, ATamperedArchiveIsRefusedAndTriedAgainLater) {
  std::string tampered = "not the archive";
  JobCode jobs(root(), UnpackLimits{}, Serving(&tampered));
  auto dir = jobs.Prepare("train-1", code_, std::nullopt);
  EXPECT_THAT(dir.status(), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(dir.status().message(),
              HasSubstr("code " + code_.sha256().substr(0, 12) +
                        " from laptop:/home/me/project: the fetched archive has SHA-256 "));
  EXPECT_FALSE(fs::exists(root() + "/train-1/code"));
  JobCode fixed(root(), UnpackLimits{}, Serving());
  EXPECT_OK(fixed.Prepare("train-1", code_, std::nullopt));
}

TEST_F(JobCodeTest, AnArchiveOverTheLimitIsRefused) {
  JobCode jobs(root(), UnpackLimits{5, 100}, Serving());
  auto dir = jobs.Prepare("train-1", code_, std::nullopt);
  EXPECT_EQ(dir.status().message(), "code " + code_.sha256().substr(0, 12) +
                                        " from laptop:/home/me/project: the archive: its "
                                        "files hold more than 5 bytes");
  EXPECT_FALSE(fs::exists(root() + "/train-1/code"));
}

TEST_F(JobCodeTest, ErrorsNameNoFileOfTheWorkerNorAnEmptySource) {
  std::string corrupt;
  {
    std::ifstream in(archive_, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    corrupt = bytes.str().substr(0, bytes.str().size() / 2);
  }
  code_.set_sha256(Sha256Of(corrupt));
  code_.clear_source();
  JobCode jobs(root(), UnpackLimits{}, Serving(&corrupt));
  auto dir = jobs.Prepare("train-1", code_, std::nullopt);
  ASSERT_THAT(dir, IsError());
  EXPECT_EQ(dir.status().message().rfind("code " + code_.sha256().substr(0, 12) + ": ", 0), 0u)
      << dir.status().message();
  EXPECT_EQ(dir.status().message().find(tmp_), std::string::npos) << dir.status().message();
  EXPECT_EQ(dir.status().message().find(".part"), std::string::npos) << dir.status().message();
}

TEST_F(JobCodeTest, ARestartedWorkerUsesWhatItUnpacked) {
  {
    JobCode jobs(root(), UnpackLimits{}, Serving());
    ASSERT_OK(jobs.Prepare("train-1", code_, std::nullopt));
  }
  JobCode again(root(), UnpackLimits{}, Serving());
  ASSERT_OK(again.Prepare("train-1", code_, std::nullopt));
  EXPECT_EQ(fetches_, 1);
}

TEST_F(JobCodeTest, DeleteRemovesTheJobsDirectory) {
  JobCode jobs(root(), UnpackLimits{}, Serving());
  ASSERT_OK(jobs.Prepare("train-1", code_, std::nullopt));
  jobs.Delete("train-1");
  EXPECT_FALSE(fs::exists(root() + "/train-1"));
  jobs.Delete("../escape");  // not a job id: nothing happens
  EXPECT_TRUE(fs::exists(tmp_));
}

}  // namespace
}  // namespace ringmaster
