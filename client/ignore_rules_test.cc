#include "client/ignore_rules.h"

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

// The cases of ignore_rules_cases.txt (its header says how they read),
// which the Python package's submit is tested against too.
TEST(IgnoreRulesTest, EveryCaseOfTheSharedFile) {
  std::ifstream in(testing::Runfile("client/ignore_rules_cases.txt"));
  ASSERT_TRUE(in) << "ignore_rules_cases.txt is missing";
  std::string section, rules_text;
  int cases = 0;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] == '[') {
      if (line == "[rules]") rules_text.clear();
      section = line;
      continue;
    }
    if (section == "[rules]") {
      rules_text += line + "\n";
      continue;
    }
    const std::vector<std::string> f = absl::StrSplit(line, '\t');
    if (section == "[globs]") {
      ASSERT_EQ(f.size(), 3u) << line;
      EXPECT_EQ(GlobMatch(f[1], f[2]), f[0] == "match") << f[1] << " against " << f[2];
      ++cases;
    } else if (section == "[paths]") {
      ASSERT_EQ(f.size(), 3u) << line;
      const IgnoreRules rules(rules_text);
      EXPECT_EQ(rules.Ignored(f[2], f[1] == "dir"), f[0] == "ignored")
          << f[2] << " (" << f[1] << ") with rules:\n"
          << rules_text;
      ++cases;
    }
  }
  EXPECT_GE(cases, 30) << "the file was not read whole";
}

}  // namespace
}  // namespace ringmaster
