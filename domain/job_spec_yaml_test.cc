#include "domain/job_spec_yaml.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

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

}  // namespace
}  // namespace ringmaster
