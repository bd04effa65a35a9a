#include "common/code_archive.h"

#include <grp.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
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

class CodeArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "code_archive_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string Write(const std::string& name, const std::string& content) {
    const std::string path = root_ + "/src-" + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }

  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // An archive with a directory, files of awkward sizes, an executable, a
  // link and a name longer than ustar's 100-byte name field.
  std::string Sample(const std::string& name) {
    const std::string archive = root_ + "/" + name;
    auto writer = ArchiveWriter::Create(archive);
    EXPECT_OK(writer);
    const std::string block(512, 'b');
    const std::string odd(1000, 'o');
    EXPECT_OK((*writer)->AddDirectory("pkg"));
    EXPECT_OK((*writer)->AddFile("pkg/empty", Write("empty", ""), 0, false));
    EXPECT_OK((*writer)->AddFile("pkg/block", Write("block", block), 512, false));
    EXPECT_OK((*writer)->AddFile("pkg/odd", Write("odd", odd), 1000, false));
    EXPECT_OK((*writer)->AddFile("run.sh", Write("run", "#!/bin/sh\n"), 10, true));
    EXPECT_OK((*writer)->AddSymlink("latest", "pkg/odd"));
    EXPECT_OK((*writer)->AddDirectory(long_dir_));
    EXPECT_OK(
        (*writer)->AddFile(long_dir_ + "/" + std::string(90, 'f'), Write("long", "x"), 1, false));
    EXPECT_OK((*writer)->Finish());
    return archive;
  }

  std::string root_;
  const std::string long_dir_ = std::string(120, 'd');
};

TEST_F(CodeArchiveTest, WhatIsPackedUnpacksTheSame) {
  const std::string archive = Sample("a.tar.gz");
  const std::string out = root_ + "/out";
  ASSERT_OK(UnpackArchive(archive, out, UnpackLimits{}));
  EXPECT_EQ(Read(out + "/pkg/empty"), "");
  EXPECT_EQ(Read(out + "/pkg/block"), std::string(512, 'b'));
  EXPECT_EQ(Read(out + "/pkg/odd"), std::string(1000, 'o'));
  EXPECT_EQ(Read(out + "/run.sh"), "#!/bin/sh\n");
  EXPECT_EQ(fs::status(out + "/run.sh").permissions() & fs::perms::owner_exec,
            fs::perms::owner_exec);
  EXPECT_EQ(fs::status(out + "/pkg/odd").permissions() & fs::perms::owner_exec, fs::perms::none);
  EXPECT_EQ(fs::read_symlink(out + "/latest"), "pkg/odd");
  EXPECT_EQ(Read(out + "/" + long_dir_ + "/" + std::string(90, 'f')), "x");
}

TEST_F(CodeArchiveTest, TheSameTreePacksToTheSameBytes) {
  const auto first = Sha256OfFile(Sample("1.tar.gz"));
  const auto second = Sha256OfFile(Sample("2.tar.gz"));
  ASSERT_OK(first);
  ASSERT_OK(second);
  EXPECT_EQ(*first, *second);
  EXPECT_TRUE(IsSha256Hex(*first));
}

TEST_F(CodeArchiveTest, SystemTarReadsIt) {
  const std::string archive = Sample("a.tar.gz");
  const std::string out = root_ + "/by-tar";
  fs::create_directory(out);
  ASSERT_EQ(std::system(("tar -xzf " + archive + " -C " + out).c_str()), 0);
  EXPECT_EQ(Read(out + "/pkg/odd"), std::string(1000, 'o'));
  EXPECT_EQ(Read(out + "/" + long_dir_ + "/" + std::string(90, 'f')), "x");
  EXPECT_EQ(fs::read_symlink(out + "/latest"), "pkg/odd");
}

TEST_F(CodeArchiveTest, LongNamesAndLinkTargetsTravelInPaxRecords) {
  const std::string archive = root_ + "/long.tar.gz";
  auto writer = ArchiveWriter::Create(archive);
  ASSERT_OK(writer);
  const std::string name(200, 'n');  // no '/' to split at
  const std::string target = "/" + std::string(150, 't') + "/" + std::string(150, 'u');
  ASSERT_OK((*writer)->AddFile(name, Write("n", "long"), 4, false));
  ASSERT_OK((*writer)->AddSymlink("link", target));
  ASSERT_OK((*writer)->Finish());
  ASSERT_OK(UnpackArchive(archive, root_ + "/out", UnpackLimits{}));
  EXPECT_EQ(Read(root_ + "/out/" + name), "long");
  EXPECT_EQ(fs::read_symlink(root_ + "/out/link"), target);
  // And system tar reads them the same.
  fs::create_directory(root_ + "/by-tar");
  ASSERT_EQ(std::system(("tar -xzf " + archive + " -C " + root_ + "/by-tar").c_str()), 0);
  EXPECT_EQ(Read(root_ + "/by-tar/" + name), "long");
  EXPECT_EQ(fs::read_symlink(root_ + "/by-tar/link"), target);
}

TEST_F(CodeArchiveTest, APaxNameIsCheckedLikeAnyOther) {
  const std::string archive = root_ + "/long.tar.gz";
  auto writer = ArchiveWriter::Create(archive);
  ASSERT_OK(writer);
  const std::string name = "../" + std::string(300, 'e');
  ASSERT_OK((*writer)->AddFile(name, Write("e", "x"), 1, false));
  ASSERT_OK((*writer)->Finish());
  const absl::Status status = UnpackArchive(archive, root_ + "/out", UnpackLimits{});
  EXPECT_THAT(status.message(), HasSubstr("not a plain relative name"));
  EXPECT_FALSE(fs::exists(root_ + "/out"));
}

// A process that may write in the directory being unpacked swaps its
// directories for links to a directory outside, again and again, while
// archives are unpacked there and their trees given away: nothing is ever
// created outside, and (as root, where the tree goes to another user)
// nothing outside is given away.
TEST_F(CodeArchiveTest, DirectoriesSwappedForLinksDuringUnpacksNeverLeadOutside) {
  const std::string archive = root_ + "/nested.tar.gz";
  std::vector<std::string> dirs;
  {
    auto writer = ArchiveWriter::Create(archive);
    ASSERT_OK(writer);
    const std::string file = Write("f", "x");
    for (const std::string top : {"a", "b"}) {
      for (const std::string& dir : {top, top + "/s", top + "/s/t"}) {
        ASSERT_OK((*writer)->AddDirectory(dir));
        dirs.push_back(dir);
        for (int i = 0; i < 4; ++i) {
          ASSERT_OK((*writer)->AddFile(dir + "/f" + std::to_string(i), file, 1, false));
        }
      }
    }
    ASSERT_OK((*writer)->Finish());
  }
  const std::string outside = root_ + "/outside";
  ASSERT_TRUE(fs::create_directory(outside));
  std::ofstream(outside + "/keep") << "mine";
  const bool as_root = geteuid() == 0;
  const UnpackOwner owner = as_root ? UnpackOwner{4242, 4242} : UnpackOwner{getuid(), getgid()};

  const std::string out = root_ + "/out";
  std::atomic<bool> stop{false};
  std::atomic<int> swaps{0};
  std::thread hostile([&] {
    while (!stop) {
      for (const std::string& dir : dirs) {
        const std::string path = out + "/" + dir;
        if (rename(path.c_str(), (path + ".away").c_str()) == 0) {
          if (symlink(outside.c_str(), path.c_str()) == 0) ++swaps;
        }
      }
    }
  });
  constexpr int kTries = 2000;
  int refused = 0;
  for (int i = 0; i < kTries; ++i) {
    std::error_code ignored;
    fs::remove_all(out, ignored);
    if (!UnpackArchive(archive, out, UnpackLimits{}).ok()) {
      ++refused;
      continue;
    }
    ChownTree(out, owner).IgnoreError();
  }
  stop = true;
  hostile.join();
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(outside)) {
    found.push_back(entry.path().filename());
  }
  EXPECT_EQ(found, std::vector<std::string>{"keep"}) << "created outside";
  struct stat st {};
  ASSERT_EQ(stat(outside.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, getuid()) << "the outside directory was given away";
  ASSERT_EQ(stat((outside + "/keep").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, getuid()) << "a file outside was given away";
  EXPECT_GT(swaps.load(), 0) << "the race was never run";
  std::cout << kTries << " unpacks, " << swaps << " directories swapped for links, " << refused
            << " unpacks refused" << (as_root ? "; trees given to uid 4242" : "") << std::endl;
}

// Archives a hostile or broken packer could send: each is refused, naming
// what is wrong, and leaves nothing behind.
class HostileArchiveTest : public CodeArchiveTest {
 protected:
  void ExpectRefused(const std::string& archive, const std::string& why,
                     UnpackLimits limits = UnpackLimits{}) {
    const std::string out = root_ + "/out";
    const absl::Status status = UnpackArchive(archive, out, limits);
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument)) << status;
    EXPECT_THAT(status.message(), HasSubstr(why));
    EXPECT_FALSE(fs::exists(out));
  }

  std::string WithFile(const std::string& name) {
    const std::string archive = root_ + "/hostile.tar.gz";
    auto writer = ArchiveWriter::Create(archive);
    EXPECT_OK(writer);
    EXPECT_OK((*writer)->AddFile(name, Write("x", "x"), 1, false));
    EXPECT_OK((*writer)->Finish());
    return archive;
  }

  // Rewrites the archive's uncompressed bytes through `edit`.
  std::string Edited(const std::string& archive, void (*edit)(std::string*)) {
    gzFile in = gzopen(archive.c_str(), "rb");
    std::string tar;
    char buffer[4096];
    for (int n; (n = gzread(in, buffer, sizeof buffer)) > 0;) tar.append(buffer, n);
    gzclose(in);
    edit(&tar);
    const std::string edited = archive + ".edited.tar.gz";
    gzFile out = gzopen(edited.c_str(), "wb");
    gzwrite(out, tar.data(), static_cast<unsigned>(tar.size()));
    gzclose(out);
    return edited;
  }
};

TEST_F(HostileArchiveTest, NamesOutsideTheDirectory) {
  ExpectRefused(WithFile("../escaped"), "entry \"../escaped\": not a plain relative name");
  ExpectRefused(WithFile("/etc/escaped"), "entry \"/etc/escaped\": not a plain relative name");
  ExpectRefused(WithFile("a/./b"), "not a plain relative name");
  EXPECT_FALSE(fs::exists(root_ + "/escaped"));
}

TEST_F(HostileArchiveTest, AFileUnderALinkIsNotWrittenThroughIt) {
  const std::string archive = root_ + "/through.tar.gz";
  auto writer = ArchiveWriter::Create(archive);
  ASSERT_OK(writer);
  ASSERT_OK((*writer)->AddSymlink("link", root_));
  ASSERT_OK((*writer)->AddFile("link/planted", Write("x", "x"), 1, false));
  ASSERT_OK((*writer)->Finish());
  ExpectRefused(archive, "entry \"link/planted\": its directory is not in the archive");
  EXPECT_FALSE(fs::exists(root_ + "/planted"));
}

TEST_F(HostileArchiveTest, ALinkIsNotReplacedByALaterFile) {
  const std::string archive = root_ + "/over.tar.gz";
  auto writer = ArchiveWriter::Create(archive);
  ASSERT_OK(writer);
  ASSERT_OK((*writer)->AddSymlink("victim", root_ + "/outside"));
  ASSERT_OK((*writer)->AddFile("victim", Write("x", "x"), 1, false));
  ASSERT_OK((*writer)->Finish());
  ExpectRefused(archive, "entry \"victim\": File exists");
  EXPECT_FALSE(fs::exists(root_ + "/outside"));
}

TEST_F(HostileArchiveTest, LimitsOnBytesAndEntries) {
  const std::string archive = Sample("a.tar.gz");
  ExpectRefused(archive, "its files hold more than 1000 bytes", UnpackLimits{1000, 100});
  ExpectRefused(archive, "more than 3 entries", UnpackLimits{1 << 20, 3});
}

TEST_F(HostileArchiveTest, BrokenArchives) {
  const std::string archive = Sample("a.tar.gz");
  ExpectRefused(Edited(archive, [](std::string* tar) { (*tar)[0] ^= 1; }),
                "a header's checksum does not match");
  ExpectRefused(Edited(archive, [](std::string* tar) { tar->resize(700); }),
                "it ends in the middle of an entry");
  ExpectRefused(Edited(archive,
                       [](std::string* tar) {
                         (*tar)[156] = '3';  // a character device
                         // Fix the checksum so that the type is what is refused.
                         unsigned sum = 0;
                         for (int i = 0; i < 512; ++i) {
                           sum +=
                               (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>((*tar)[i]);
                         }
                         snprintf(&(*tar)[148], 8, "%06o", sum);
                       }),
                "type '3' is not a file, directory or link");
  ExpectRefused(Write("plain", std::string(2048, 'p')), "not gzip-compressed");
}

// A worker that is not root: uid and gid 4242 with only CAP_CHOWN, as the
// systemd unit runs it (CAP_CHOWN is what matters here). Runs `remove` in
// a child so, and returns its exit code.
int AsNonRootWithChown(const std::function<bool()>& remove, bool keep_chown) {
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_KEEPCAPS, 1);
    if (setgroups(0, nullptr) != 0 || setresgid(4242, 4242, 4242) != 0 ||
        setresuid(4242, 4242, 4242) != 0) {
      _exit(3);
    }
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    if (keep_chown) data[0].effective = data[0].permitted = 1u << CAP_CHOWN;
    if (syscall(SYS_capset, &header, data) != 0) _exit(4);
    _exit(remove() ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A job's user's tree, with a directory it locked (mode 0) and a link out:
// RemoveTree removes it as that worker, leaving what the link names;
// without CAP_CHOWN, or with a plain recursive remove, it cannot.
TEST(RemoveTreeTest, AWorkerThatIsNotRootRemovesAJobUsersTree) {
  if (geteuid() != 0) GTEST_SKIP() << "making another user's tree needs root";
  // Not below TEST_TMPDIR: uid 4242 may not pass through /root.
  char made[] = "/tmp/remove-tree-XXXXXX";
  ASSERT_NE(mkdtemp(made), nullptr);
  const std::string parent = made;
  const std::string job = parent + "/job";
  auto make = [&] {
    fs::create_directories(job + "/home/locked/deeper");
    std::ofstream(job + "/home/locked/deeper/file") << "x";
    std::ofstream(parent + "/outside") << "keep";
    fs::create_symlink(parent + "/outside", job + "/home/link");
    for (const std::string& p : {job + "/home/locked/deeper/file", job + "/home/locked/deeper",
                                 job + "/home/locked", job + "/home"}) {
      ASSERT_EQ(lchown(p.c_str(), 200007, 200007), 0) << p;
    }
    ASSERT_EQ(lchown((job + "/home/link").c_str(), 200007, 200007), 0);
    ASSERT_EQ(chmod((job + "/home/locked").c_str(), 0), 0);
    ASSERT_EQ(chown(parent.c_str(), 4242, 4242), 0);
    ASSERT_EQ(chown(job.c_str(), 4242, 4242), 0);
  };
  make();
  struct stat st;
  ASSERT_EQ(AsNonRootWithChown([&] { return stat(job.c_str(), &st) == 0; }, false), 0)
      << "the worker's uid must reach the tree for the rest to mean anything";
  EXPECT_EQ(AsNonRootWithChown(
                [&] {
                  std::error_code error;
                  fs::remove_all(job, error);
                  return !error;
                },
                true),
            1)
      << "a plain recursive remove cannot enter the locked directory";
  EXPECT_EQ(AsNonRootWithChown([&] { return RemoveTree(job).ok(); }, false), 1)
      << "without CAP_CHOWN the job's directories are not the worker's to take";
  EXPECT_TRUE(fs::exists(job + "/home/locked/deeper/file"));
  EXPECT_EQ(AsNonRootWithChown([&] { return RemoveTree(job).ok(); }, true), 0);
  EXPECT_FALSE(fs::exists(job));
  EXPECT_TRUE(fs::exists(parent + "/outside")) << "the link was removed, not what it names";
  fs::remove_all(parent);
}

}  // namespace
}  // namespace ringmaster
