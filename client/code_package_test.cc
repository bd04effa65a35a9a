#include "client/code_package.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/code_archive.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class PackDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "code_package_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    dir_ = root_ + "/project";
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void Put(const std::string& name, const std::string& content) {
    fs::create_directories(fs::path(dir_ + "/" + name).parent_path());
    std::ofstream(dir_ + "/" + name, std::ios::binary) << content;
  }

  std::string root_;
  std::string dir_;
};

// A case of code_package_cases.txt (its header says how they read).
struct PackCase {
  std::string what;
  std::vector<std::string> tree;
  std::vector<std::string> packed;
  std::string sha256;
};

std::vector<PackCase> PackCases() {
  std::ifstream in(testing::Runfile("client/code_package_cases.txt"));
  std::vector<PackCase> cases;
  std::string part;
  for (std::string line; std::getline(in, line);) {
    if (absl::StartsWith(line, "=== ")) {
      cases.push_back({line.substr(4)});
      part = "tree";
    } else if (absl::StartsWith(line, "--- ")) {
      part = line.substr(4);
    } else if (!cases.empty()) {
      if (part == "tree") cases.back().tree.push_back(line);
      if (part == "packed") cases.back().packed.push_back(line);
      if (part == "sha256") cases.back().sha256 = line;
    }
  }
  return cases;
}

std::string Unescape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      const char next = text[++i];
      out += next == 'n' ? '\n' : next == 't' ? '\t' : next;
    } else {
      out += text[i];
    }
  }
  return out;
}

// The same directories pack to the same bytes as the Python package's
// (python/tests), which also checks the members the cases list.
TEST_F(PackDirectoryTest, PacksEveryCaseToTheBytesThePythonClientDoes) {
  const std::vector<PackCase> cases = PackCases();
  ASSERT_GE(cases.size(), 3u) << "client/code_package_cases.txt is missing or short";
  for (size_t n = 0; n < cases.size(); ++n) {
    const PackCase& c = cases[n];
    const std::string top = root_ + "/case-" + std::to_string(n);
    fs::create_directories(top);
    for (const std::string& line : c.tree) {
      std::vector<std::string> words = absl::StrSplit(line, absl::MaxSplits(' ', 3));
      const std::string path = top + "/" + words[1];
      fs::create_directories(fs::path(path).parent_path());
      if (words[0] == "dir") {
        fs::create_directories(path);
      } else if (words[0] == "link") {
        fs::create_symlink(words[2], path);
      } else {
        std::ofstream(path, std::ios::binary) << Unescape(words.size() > 3 ? words[3] : "");
        fs::permissions(path, static_cast<fs::perms>(std::stoi(words[2], nullptr, 8)));
      }
    }
    auto packed = PackDirectory(top, 1 << 20, top + ".tar.gz");
    ASSERT_OK(packed) << c.what;
    EXPECT_EQ(packed->sha256, c.sha256) << c.what;
    EXPECT_EQ(packed->files,
              std::count_if(c.packed.begin(), c.packed.end(),
                            [](const auto& m) { return absl::StartsWith(m, "file "); }))
        << c.what;
  }
}

TEST_F(PackDirectoryTest, PacksWhatTheIgnoreFileDoesNotLeaveOut) {
  Put("train.py", "print('hi')\n");
  Put("lib/model.py", "x = 1\n");
  Put("lib/model.pyc", "compiled");
  Put("data/big.bin", std::string(4096, 'd'));
  Put(".git/HEAD", "ref: refs/heads/main\n");
  Put(".ringmasterignore", "*.pyc\ndata/\n");
  fs::create_symlink("lib/model.py", dir_ + "/model.py");
  fs::permissions(dir_ + "/train.py", fs::perms::owner_exec, fs::perm_options::add);

  auto packed = PackDirectory(dir_, 1 << 20, root_ + "/code.tar.gz");
  ASSERT_OK(packed) << packed.status();
  EXPECT_EQ(packed->files, 3);  // train.py, lib/model.py, .ringmasterignore
  EXPECT_EQ(packed->sha256.size(), 64u);

  ASSERT_OK(UnpackArchive(root_ + "/code.tar.gz", root_ + "/out", UnpackLimits{}));
  EXPECT_TRUE(fs::exists(root_ + "/out/train.py"));
  EXPECT_TRUE(fs::exists(root_ + "/out/lib/model.py"));
  EXPECT_FALSE(fs::exists(root_ + "/out/lib/model.pyc"));
  EXPECT_FALSE(fs::exists(root_ + "/out/data"));
  EXPECT_FALSE(fs::exists(root_ + "/out/.git"));
  EXPECT_EQ(fs::read_symlink(root_ + "/out/model.py"), "lib/model.py");
  EXPECT_NE(fs::status(root_ + "/out/train.py").permissions() & fs::perms::owner_exec,
            fs::perms::none);
}

TEST_F(PackDirectoryTest, TheSameContentHasTheSameHash) {
  Put("a.py", "a");
  Put("sub/b.py", "b");
  auto first = PackDirectory(dir_, 1 << 20, root_ + "/1.tar.gz");
  // Touched, not changed: the same hash.
  Put("a.py", "a");
  auto second = PackDirectory(dir_, 1 << 20, root_ + "/2.tar.gz");
  Put("a.py", "changed");
  auto third = PackDirectory(dir_, 1 << 20, root_ + "/3.tar.gz");
  ASSERT_OK(first);
  ASSERT_OK(second);
  ASSERT_OK(third);
  EXPECT_EQ(first->sha256, second->sha256);
  EXPECT_NE(first->sha256, third->sha256);
}

TEST_F(PackDirectoryTest, OverTheLimitNamesTheLargestEntries) {
  Put("checkpoints/a.bin", std::string(600'000, 'c'));
  Put("checkpoints/b.bin", std::string(600'000, 'c'));
  Put("dataset.csv", std::string(300'000, 'd'));
  Put("train.py", "x");
  // --upload-limit-mb 1
  auto packed = PackDirectory(dir_, 1 << 20, root_ + "/code.tar.gz");
  EXPECT_THAT(packed.status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(packed.status().message(), HasSubstr("holds 1.4 MiB to upload, more than the 1.0 "
                                                   "MiB limit (--upload-limit-mb)"));
  EXPECT_THAT(packed.status().message(), HasSubstr("the largest: checkpoints/ 1.1 MiB, "
                                                   "dataset.csv 0.3 MiB, train.py 0.0 MiB"));
  EXPECT_THAT(packed.status().message(), HasSubstr(dir_ + "/.ringmasterignore"));
  EXPECT_FALSE(fs::exists(root_ + "/code.tar.gz"));  // nothing written
}

TEST_F(PackDirectoryTest, SocketsStayBehind) {
  Put("train.py", "x");
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string path = dir_ + "/agent.sock";
  ASSERT_LT(path.size(), sizeof address.sun_path);
  memcpy(address.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  auto packed = PackDirectory(dir_, 1 << 20, root_ + "/code.tar.gz");
  close(fd);
  ASSERT_OK(packed) << packed.status();
  EXPECT_EQ(packed->files, 1);
}

TEST_F(PackDirectoryTest, AnUnreadableDirectoryIsAnError) {
  auto packed = PackDirectory(root_ + "/missing", 1 << 20, root_ + "/code.tar.gz");
  EXPECT_THAT(packed.status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(packed.status().message(), HasSubstr(root_ + "/missing"));
}

}  // namespace
}  // namespace ringmaster
