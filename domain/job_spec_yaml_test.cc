#include "domain/job_spec_yaml.h"

#include <fstream>
#include <string>
#include <vector>

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/limits.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

// A case of job_spec_cases.txt (its header says how they read).
struct SpecCase {
  std::string what;
  std::string text;      // the spec as written
  std::string kind;      // "spec" or "error"
  std::string expected;  // the JobSpec in text format, or words of the error
};

std::vector<SpecCase> SpecCases() {
  std::ifstream in(testing::Runfile("domain/job_spec_cases.txt"));
  std::vector<SpecCase> cases;
  std::vector<std::string> lines;
  std::string part;
  auto close = [&] {
    if (cases.empty()) return;
    std::string& into = part == "in" ? cases.back().text : cases.back().expected;
    into = absl::StrCat(absl::StrJoin(lines, "\n"), part == "in" ? "\n" : "");
    lines.clear();
  };
  for (std::string line; std::getline(in, line);) {
    if (absl::StartsWith(line, "=== ")) {
      close();
      cases.push_back({line.substr(4)});
      part = "in";
    } else if (absl::StartsWith(line, "--- ")) {
      close();
      part = line.substr(4);
      cases.back().kind = part;
    } else if (!cases.empty()) {
      lines.push_back(line);
    }
  }
  close();
  return cases;
}

// The same cases as the Python package's reader (python/tests).
TEST(JobSpecYamlTest, ReadsEveryCaseAsThePythonClientDoes) {
  const std::vector<SpecCase> cases = SpecCases();
  ASSERT_GE(cases.size(), 20u) << "domain/job_spec_cases.txt is missing or short";
  for (const SpecCase& c : cases) {
    absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml(c.text);
    if (c.kind == "spec") {
      v1::JobSpec expected;
      ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(c.expected, &expected)) << c.what;
      ASSERT_OK(spec) << c.what;
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*spec, expected))
          << c.what << ": read as\n"
          << spec->DebugString() << "expected\n"
          << expected.DebugString();
    } else {
      EXPECT_THAT(spec,
                  StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr(c.expected)))
          << c.what;
    }
  }
}

TEST(JobSpecYamlTest, ReadsTheSpecExample) {
  auto spec = ParseJobSpecYaml(R"(
name: digits-mlp
ranks: 2
min_ranks: 1
gpus_per_rank: 0
max_restarts: 3
env: {KEY: value, N: 3}
trainer:
  model: {type: mlp, hidden: [256, 256]}
  data: {path: digits, format: csv, label_column: -1}
  epochs: 20
  batch_size: 64
  optimizer: {type: adamw, lr: 0.001, weight_decay: 0.01}
  lr_scaling: linear
  warmup_steps: 50
  bucket_mb: 25
  seed: 1
)");
  ASSERT_OK(spec) << spec.status();
  EXPECT_EQ(spec->name(), "digits-mlp");
  EXPECT_EQ(spec->ranks(), 2);
  EXPECT_EQ(spec->env().at("N"), "3");
  EXPECT_EQ(spec->trainer().model().hidden_size(), 2);
  EXPECT_EQ(spec->trainer().data().label_column(), -1);
  EXPECT_DOUBLE_EQ(spec->trainer().optimizer().lr(), 0.001);
}

TEST(JobSpecYamlTest, ReadsPlacementAndPolicyFields) {
  auto spec = ParseJobSpecYaml(R"(
name: j
ranks: 4
command: [python3, t.py]
restart_policy: on_failure
never_retry_exit_codes: [2, 64]
deadline_s: 3600
labels: {team: vision}
worker_selector: {zone: a}
ranks_per_worker: 2
resources: {cpus: 1, gpus: 0, memory_mb: 512}
)");
  ASSERT_OK(spec) << spec.status();
  EXPECT_EQ(spec->restart_policy(), "on_failure");
  EXPECT_EQ(spec->never_retry_exit_codes_size(), 2);
  EXPECT_EQ(spec->never_retry_exit_codes(1), 64);
  EXPECT_EQ(spec->deadline_s(), 3600);
  EXPECT_EQ(spec->labels().at("team"), "vision");
  EXPECT_EQ(spec->worker_selector().at("zone"), "a");
  EXPECT_EQ(spec->ranks_per_worker(), 2);
  EXPECT_EQ(spec->resources().cpus(), 1);
  EXPECT_EQ(spec->resources().memory_mb(), 512);
}

TEST(JobSpecYamlTest, AcceptsJson) {
  auto spec = ParseJobSpecYaml(R"({"name": "j", "ranks": 2, "command": ["python3", "t.py"]})");
  ASSERT_OK(spec) << spec.status();
  EXPECT_EQ(spec->command(1), "t.py");
}

TEST(JobSpecYamlTest, ErrorsNameThePlace) {
  const std::pair<const char*, const char*> cases[] = {
      {"name: [unclosed", "line 1, column"},
      {"ranks: two", "ranks: expected an integer, got \"two\""},
      {"trainer: {optimiser: {lr: 1}}", "trainer.optimiser: unknown field"},
      {"trainer: {optimizer: {lr: fast}}", "trainer.optimizer.lr: expected a number"},
      {"command: python3", "command: expected a list"},
      {"env: [a, b]", "env: expected a mapping"},
      {"- just\n- a list", "job spec: expected a mapping"},
      {"trainer: {model: {hidden: [1, x]}}", "trainer.model.hidden[1]: expected an integer"},
  };
  for (const auto& [yaml, want] : cases) {
    auto spec = ParseJobSpecYaml(yaml);
    ASSERT_THAT(spec, IsError()) << yaml;
    EXPECT_THAT(spec.status(), StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_NE(spec.status().message().find(want), std::string::npos)
        << "want \"" << want << "\" in: " << spec.status().message();
  }
}

TEST(JobSpecYamlTest, AKeyThatIsNotAPlainValueIsRefusedWithItsPlace) {
  auto label = ParseJobSpecYaml("name: a\nlabels:\n  [team, x]: a\n");
  EXPECT_EQ(label.status().message(),
            "line 3, column 3: labels: a key must be a plain value, got a list");
  auto top = ParseJobSpecYaml("{a: 1}: 2\n");
  EXPECT_EQ(top.status().message(), "line 1, column 1: a key must be a plain value, got a mapping");
}

TEST(JobSpecYamlTest, DuplicateKeysAreRefusedWithTheirPlace) {
  auto twice = ParseJobSpecYaml("name: a\nranks: 1\nname: b\n");
  EXPECT_EQ(twice.status().message(), "line 3, column 1: name: duplicate key (first at line 1)");
  auto nested = ParseJobSpecYaml("trainer:\n  optimizer: {lr: 1, lr: 2}\n");
  EXPECT_EQ(nested.status().message(),
            "line 2, column 22: trainer.optimizer.lr: duplicate key (first at line 2)");
  auto env = ParseJobSpecYaml("env:\n  A: 1\n  A: 2\n");
  EXPECT_EQ(env.status().message(), "line 3, column 3: env.A: duplicate key (first at line 2)");
}

TEST(JobSpecYamlTest, DeepDocumentsAreRefusedWithTheirPlace) {
  const std::string deep = "command: " + std::string(100000, '[') + std::string(100000, ']');
  auto spec = ParseJobSpecYaml(deep);
  EXPECT_THAT(spec.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(spec.status().message().find("line 1, column"), std::string::npos) << spec.status();
  EXPECT_NE(spec.status().message().find("nested too deep"), std::string::npos) << spec.status();
}

TEST(JobSpecYamlTest, SpecsOverTheLimitAreRefusedBeforeParsing) {
  const std::string big = "name: x\nenv: {A: \"" + std::string(kDefaultMaxSpecBytes, 'x') + "\"}\n";
  auto spec = ParseJobSpecYaml(big);
  EXPECT_THAT(spec.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(spec.status().message(),
            absl::StrCat("the job spec is ", big.size(), " bytes; the limit is 1048576"));
}

// A few kilobytes of aliases of aliases stand for gigabytes: refused before
// they are read, not copied into the spec.
TEST(JobSpecYamlTest, AliasesThatStandForTooMuchAreRefused) {
  std::string text = "name: bomb\nranks: 1\nenv:\n  A: &a \"" + std::string(1000, 'x') +
                     "\"\ncommand: &l0 [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n";
  for (int level = 1; level <= 6; ++level) {
    text += "labels" + std::to_string(level) + ": &l" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) text += (i ? ", *l" : "*l") + std::to_string(level - 1);
    text += "]\n";
  }
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml(text);
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()),
              ::testing::HasSubstr("once its YAML aliases are read"));
  // A few aliases that stand for little are read as before.
  absl::StatusOr<v1::JobSpec> small =
      ParseJobSpecYaml("name: ok\nranks: 1\ncommand: &c [sleep, '1']\nenv: {A: &v x, B: *v}\n");
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->env().at("B"), "x");
}

}  // namespace
}  // namespace ringmaster
