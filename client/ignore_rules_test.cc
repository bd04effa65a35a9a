#include "client/ignore_rules.h"

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

TEST(GlobMatchTest, StarsQuestionMarksAndClasses) {
  EXPECT_TRUE(GlobMatch("*.pyc", "a.pyc"));
  EXPECT_FALSE(GlobMatch("*.pyc", "dir/a.pyc"));  // '*' stops at '/'
  EXPECT_TRUE(GlobMatch("a?c", "abc"));
  EXPECT_FALSE(GlobMatch("a?c", "a/c"));
  EXPECT_TRUE(GlobMatch("run[0-9]", "run7"));
  EXPECT_FALSE(GlobMatch("run[!0-9]", "run7"));
  EXPECT_TRUE(GlobMatch("run[!0-9]", "runx"));
  EXPECT_TRUE(GlobMatch("a[", "a["));  // no ']': an ordinary '['
  EXPECT_TRUE(GlobMatch("\\*", "*"));
  EXPECT_FALSE(GlobMatch("\\*", "x"));
}

TEST(GlobMatchTest, DoubleStarsSpanDirectories) {
  EXPECT_TRUE(GlobMatch("**/cache", "cache"));
  EXPECT_TRUE(GlobMatch("**/cache", "a/b/cache"));
  EXPECT_TRUE(GlobMatch("logs/**", "logs/a/b"));
  EXPECT_FALSE(GlobMatch("logs/**", "logs"));
  EXPECT_TRUE(GlobMatch("a/**/b", "a/b"));
  EXPECT_TRUE(GlobMatch("a/**/b", "a/x/y/b"));
  EXPECT_FALSE(GlobMatch("a/**/b", "a/x/y/c"));
  EXPECT_TRUE(GlobMatch("a**b", "axxb"));
}

TEST(IgnoreRulesTest, GitignoreMeaning) {
  const IgnoreRules rules(
      "# data and outputs\n"
      "\n"
      "*.pyc\n"
      "/build\n"
      "data/\n"
      "src/gen/*.h\n"
      "!keep.pyc\n"
      "trailing   \n");
  EXPECT_TRUE(rules.Ignored("a.pyc", false));
  EXPECT_TRUE(rules.Ignored("deep/er/a.pyc", false));
  EXPECT_FALSE(rules.Ignored("keep.pyc", false));  // taken back
  EXPECT_TRUE(rules.Ignored("build", true));
  EXPECT_FALSE(rules.Ignored("src/build", true));  // anchored at the top
  EXPECT_TRUE(rules.Ignored("data", true));
  EXPECT_TRUE(rules.Ignored("x/data", true));
  EXPECT_FALSE(rules.Ignored("data", false));  // directories only
  EXPECT_TRUE(rules.Ignored("src/gen/a.h", false));
  EXPECT_FALSE(rules.Ignored("gen/a.h", false));
  EXPECT_TRUE(rules.Ignored("trailing", false));  // spaces at the end dropped
  EXPECT_FALSE(rules.Ignored("# data and outputs", false));
}

TEST(IgnoreRulesTest, GitDirectoryAlwaysLeftOut) {
  const IgnoreRules rules("");
  EXPECT_TRUE(rules.Ignored(".git", true));
  EXPECT_TRUE(rules.Ignored("vendor/lib/.git", true));
  EXPECT_FALSE(rules.Ignored(".gitignore", false));
  EXPECT_FALSE(rules.Ignored("train.py", false));
}

}  // namespace
}  // namespace ringmaster
