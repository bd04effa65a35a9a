#include "domain/spec_validation.h"
#include "testing/status_matchers.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

v1::JobSpec CommandSpec() {
  v1::JobSpec spec;
  spec.set_name("demo-job");
  spec.set_ranks(2);
  spec.add_command("python3");
  spec.add_command("train.py");
  return spec;
}

v1::JobSpec TrainerJobSpec() {
  v1::JobSpec spec;
  spec.set_name("digits-mlp");
  spec.set_ranks(2);
  spec.mutable_trainer()->mutable_data()->set_path("digits");
  return spec;
}

TEST(SpecValidationTest, GoodSpecsPass) {
  EXPECT_OK(ValidateJobSpec(CommandSpec()));
  EXPECT_OK(ValidateJobSpec(TrainerJobSpec()));
}

TEST(SpecValidationTest, AnImageIsForACommandAndPulledIfNotPresentUnlessSaid) {
  v1::JobSpec spec = CommandSpec();
  spec.set_image("registry.example:5000/team/train:1.2");
  EXPECT_OK(ValidateJobSpec(spec));
  ApplyJobSpecDefaults(&spec);
  EXPECT_EQ(spec.image_pull(), "if_not_present");
  spec.set_image_pull("always");
  EXPECT_OK(ValidateJobSpec(spec));
  v1::JobSpec plain = CommandSpec();
  ApplyJobSpecDefaults(&plain);
  EXPECT_EQ(plain.image_pull(), "") << "without an image nothing changes";

  v1::JobSpec checked = spec;
  checked.set_preflight(true);
  EXPECT_THAT(ValidateJobSpec(checked),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::HasSubstr("preflight: runs the worker's own trainer before the "
                                            "command, which a job's image does not have")));

  v1::JobSpec trainer = TrainerJobSpec();
  trainer.set_image("team/train:1.2");
  EXPECT_THAT(ValidateJobSpec(trainer),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::HasSubstr("image: runs a command; the built-in trainer runs on "
                                            "the worker's host")));
  spec.set_image("team/Train");
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::HasSubstr(
                           "image: \"team/Train\" is not an image reference: \"Train\" is not a "
                           "path component: lowercase letters and digits, joined by '.', '_', "
                           "'__' or dashes")));
}

struct BadCase {
  std::string field;
  std::function<void(v1::JobSpec*)> mutate;
};

TEST(SpecValidationTest, EachBadFieldIsNamed) {
  const BadCase cases[] = {
      {"name", [](v1::JobSpec* s) { s->set_name(""); }},
      {"name", [](v1::JobSpec* s) { s->set_name("Has_Upper"); }},
      {"name", [](v1::JobSpec* s) { s->set_name("-dash"); }},
      {"ranks", [](v1::JobSpec* s) { s->set_ranks(0); }},
      {"ranks", [](v1::JobSpec* s) { s->set_ranks(100000); }},
      {"min_ranks", [](v1::JobSpec* s) { s->set_min_ranks(3); }},
      {"min_ranks", [](v1::JobSpec* s) { s->set_min_ranks(-1); }},
      {"gpus_per_rank", [](v1::JobSpec* s) { s->set_gpus_per_rank(-1); }},
      {"spare_ok",
       [](v1::JobSpec* s) {
         s->set_spare_ok(true);
         s->set_preemptible(false);
       }},
      {"max_restarts", [](v1::JobSpec* s) { s->set_max_restarts(-2); }},
      {"env.1BAD", [](v1::JobSpec* s) { (*s->mutable_env())["1BAD"] = "x"; }},
      {"env.RANK", [](v1::JobSpec* s) { (*s->mutable_env())["RANK"] = "3"; }},
      {"env.RINGMASTER_JOB_ID",
       [](v1::JobSpec* s) { (*s->mutable_env())["RINGMASTER_JOB_ID"] = "x"; }},
      {"env.SECRET",
       [](v1::JobSpec* s) { (*s->mutable_env())["SECRET"] = std::string("abc\0def", 7); }},
      {"checkpoint_dir",
       [](v1::JobSpec* s) { s->set_checkpoint_dir(std::string("/srv/ckpt\0/etc", 14)); }},
      {"command[2]", [](v1::JobSpec* s) { s->add_command(std::string("a\0b", 3)); }},
      {"trainer/command", [](v1::JobSpec* s) { s->clear_command(); }},
      {"trainer/command",
       [](v1::JobSpec* s) { s->mutable_trainer()->mutable_data()->set_path("d"); }},
      {"command[0]", [](v1::JobSpec* s) { s->set_command(0, ""); }},
      {"working_dir", [](v1::JobSpec* s) { s->set_working_dir("relative"); }},
      {"checkpoint_dir", [](v1::JobSpec* s) { s->set_checkpoint_dir("ckpt"); }},
      {"labels", [](v1::JobSpec* s) { (*s->mutable_labels())["team!"] = "vision"; }},
      {"labels", [](v1::JobSpec* s) { (*s->mutable_labels())["team"] = "a b"; }},
      {"worker_selector", [](v1::JobSpec* s) { (*s->mutable_worker_selector())[""] = "a"; }},
      {"ranks_per_worker", [](v1::JobSpec* s) { s->set_ranks_per_worker(-1); }},
      {"ranks_per_worker", [](v1::JobSpec* s) { s->set_ranks_per_worker(3); }},
      {"ranks_per_worker",
       [](v1::JobSpec* s) {
         s->set_ranks(6);
         s->set_ranks_per_worker(4);
       }},
      {"min_ranks",
       [](v1::JobSpec* s) {
         s->set_ranks(4);
         s->set_min_ranks(3);
         s->set_ranks_per_worker(2);
       }},
      {"deadline_s", [](v1::JobSpec* s) { s->set_deadline_s(-1); }},
      {"restart_policy", [](v1::JobSpec* s) { s->set_restart_policy("always"); }},
      {"never_retry_exit_codes", [](v1::JobSpec* s) { s->add_never_retry_exit_codes(0); }},
      {"never_retry_exit_codes", [](v1::JobSpec* s) { s->add_never_retry_exit_codes(256); }},
      {"resources.cpus", [](v1::JobSpec* s) { s->mutable_resources()->set_cpus(-1); }},
      {"resources.memory_mb", [](v1::JobSpec* s) { s->mutable_resources()->set_memory_mb(-1); }},
      {"image", [](v1::JobSpec* s) { s->set_image("Team/train:1.2"); }},
      {"image", [](v1::JobSpec* s) { s->set_image("team/train:"); }},
      {"image_pull", [](v1::JobSpec* s) { s->set_image_pull("always"); }},
      {"image_pull",
       [](v1::JobSpec* s) {
         s->set_image("team/train:1.2");
         s->set_image_pull("never");
       }},
  };
  for (const BadCase& c : cases) {
    v1::JobSpec spec = CommandSpec();
    c.mutate(&spec);
    absl::Status status = ValidateJobSpec(spec);
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument)) << c.field;
    EXPECT_NE(status.message().find(c.field + ":"), std::string::npos)
        << "want field " << c.field << " in: " << status.message();
  }
}

TEST(SpecValidationTest, EachBadTrainerFieldIsNamed) {
  const BadCase cases[] = {
      {"trainer.model.type",
       [](v1::JobSpec* s) { s->mutable_trainer()->mutable_model()->set_type("cnn"); }},
      {"trainer.model.hidden[1]",
       [](v1::JobSpec* s) {
         s->mutable_trainer()->mutable_model()->add_hidden(8);
         s->mutable_trainer()->mutable_model()->add_hidden(0);
       }},
      {"trainer.data.path",
       [](v1::JobSpec* s) { s->mutable_trainer()->mutable_data()->clear_path(); }},
      {"trainer.data.format",
       [](v1::JobSpec* s) { s->mutable_trainer()->mutable_data()->set_format("xls"); }},
      {"trainer.epochs", [](v1::JobSpec* s) { s->mutable_trainer()->set_epochs(-1); }},
      {"trainer.batch_size", [](v1::JobSpec* s) { s->mutable_trainer()->set_batch_size(-4); }},
      {"trainer.optimizer.type",
       [](v1::JobSpec* s) { s->mutable_trainer()->mutable_optimizer()->set_type("lion"); }},
      {"trainer.optimizer.lr",
       [](v1::JobSpec* s) { s->mutable_trainer()->mutable_optimizer()->set_lr(-1); }},
      {"trainer.optimizer.momentum",
       [](v1::JobSpec* s) { s->mutable_trainer()->mutable_optimizer()->set_momentum(1.5); }},
      {"trainer.lr_scaling", [](v1::JobSpec* s) { s->mutable_trainer()->set_lr_scaling("cubic"); }},
      {"trainer.precision", [](v1::JobSpec* s) { s->mutable_trainer()->set_precision("bf16"); }},
      {"trainer.grad_compression",
       [](v1::JobSpec* s) { s->mutable_trainer()->set_grad_compression("int8"); }},
      {"trainer.bucket_mb", [](v1::JobSpec* s) { s->mutable_trainer()->set_bucket_mb(-1); }},
  };
  for (const BadCase& c : cases) {
    v1::JobSpec spec = TrainerJobSpec();
    c.mutate(&spec);
    absl::Status status = ValidateJobSpec(spec);
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument)) << c.field;
    EXPECT_NE(status.message().find(c.field + ":"), std::string::npos)
        << "want field " << c.field << " in: " << status.message();
  }
}

// The trainer would leave a rank's extra GPUs idle; a command job may use them.
TEST(SpecValidationTest, TheTrainerTakesOneGpuPerRank) {
  v1::JobSpec trainer = TrainerJobSpec();
  trainer.set_gpus_per_rank(1);
  EXPECT_OK(ValidateJobSpec(trainer));
  trainer.set_gpus_per_rank(4);
  EXPECT_EQ(ValidateJobSpec(trainer).message(),
            "invalid job spec: gpus_per_rank: is 4 but the built-in trainer drives one GPU per "
            "rank; run gpus_per_rank: 1 with 4x the ranks (a command job may take several GPUs "
            "per rank)");
  trainer.set_gpus_per_rank(0);
  trainer.mutable_resources()->set_gpus(2);
  EXPECT_THAT(ValidateJobSpec(trainer), StatusIs(absl::StatusCode::kInvalidArgument));
  v1::JobSpec command = CommandSpec();
  command.set_gpus_per_rank(4);
  EXPECT_OK(ValidateJobSpec(command));
}

// NaN passes every comparison, so each number is checked for being finite.
TEST(SpecValidationTest, NumbersMustBeFinite) {
  const double nan = std::nan("");
  const double inf = std::numeric_limits<double>::infinity();
  const BadCase cases[] = {
      {"trainer.optimizer.lr",
       [=](v1::JobSpec* s) { s->mutable_trainer()->mutable_optimizer()->set_lr(nan); }},
      {"trainer.optimizer.lr",
       [=](v1::JobSpec* s) { s->mutable_trainer()->mutable_optimizer()->set_lr(inf); }},
      {"trainer.data.test_fraction",
       [=](v1::JobSpec* s) { s->mutable_trainer()->mutable_data()->set_test_fraction(nan); }},
      {"trainer.bucket_mb", [=](v1::JobSpec* s) { s->mutable_trainer()->set_bucket_mb(-inf); }},
      {"trainer.grad_clip_norm",
       [=](v1::JobSpec* s) { s->mutable_trainer()->set_grad_clip_norm(nan); }},
  };
  for (const BadCase& c : cases) {
    v1::JobSpec spec = TrainerJobSpec();
    c.mutate(&spec);
    absl::Status status = ValidateJobSpec(spec);
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument)) << c.field;
    EXPECT_NE(status.message().find(c.field + ": must be a finite number"), std::string::npos)
        << status.message();
  }
}

TEST(SpecValidationTest, SizesAreBoundedAndRefusalsNameTheLimit) {
  v1::JobSpec big = CommandSpec();
  (*big.mutable_env())["BLOB"] = std::string(100000, 'x');
  (*big.mutable_env())["MORE"] = std::string(100000, 'x');
  absl::Status spec = ValidateJobSpec(big, {/*max_spec_bytes=*/150000, kDefaultMaxEnvBytes});
  EXPECT_THAT(spec, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(spec.message().find("the limit is 150000 (coordinator --max-spec-bytes)"),
            absl::string_view::npos)
      << spec;
  absl::Status env = ValidateJobSpec(big, {kDefaultMaxSpecBytes, /*max_env_bytes=*/150000});
  EXPECT_NE(env.message().find("env and command: hold 200029 bytes; the limit is 150000 "
                               "(coordinator --max-env-bytes)"),
            absl::string_view::npos)
      << env;
  EXPECT_OK(ValidateJobSpec(big)) << "200 KB of env is within the defaults";

  v1::JobSpec one = CommandSpec();
  (*one.mutable_env())["HUGE"] = std::string(kMaxEnvEntryBytes, 'x');
  absl::Status entry = ValidateJobSpec(one);
  EXPECT_NE(entry.message().find("env.HUGE: is 131078 bytes; a variable may hold at most 131072"),
            absl::string_view::npos)
      << entry;
}

TEST(SpecValidationTest, PlacementAndPolicyFieldsThatAreRightPass) {
  v1::JobSpec spec = CommandSpec();
  (*spec.mutable_labels())["example.com/team"] = "vision";
  (*spec.mutable_labels())["empty"] = "";
  (*spec.mutable_worker_selector())["zone"] = "us-east-1a";
  spec.set_ranks(4);
  spec.set_ranks_per_worker(2);
  spec.set_deadline_s(3600);
  spec.set_restart_policy("never");
  spec.add_never_retry_exit_codes(2);
  spec.mutable_resources()->set_cpus(4);
  spec.mutable_resources()->set_memory_mb(2048);
  EXPECT_OK(ValidateJobSpec(spec)) << ValidateJobSpec(spec);
  const absl::Status bad_label = ValidateJobSpec([&] {
    v1::JobSpec s = spec;
    (*s.mutable_labels())["team"] = "a b";
    return s;
  }());
  EXPECT_EQ(bad_label.message(),
            "invalid job spec: labels: label team: value \"a b\" must be empty or 1-63 letters, "
            "digits, '-', '_' or '.', starting and ending with a letter or digit");
}

TEST(SpecValidationTest, PlacementNamesLevelsOfTheCluster) {
  const std::vector<std::string> levels = {"block", "rack", "host"};
  v1::JobSpec spec = TrainerJobSpec();
  EXPECT_OK(ValidatePlacement(spec, {})) << "no placement, no levels needed";
  spec.mutable_placement()->set_pack("rack");
  spec.mutable_placement()->set_mode("preferred");
  spec.mutable_placement()->set_spread("host");
  EXPECT_OK(ValidatePlacement(spec, levels));
  EXPECT_EQ(ValidatePlacement(spec, {}).message(),
            "invalid job spec: placement.pack: this cluster has no --topology-levels, so no "
            "level \"rack\"; leave placement out");
  spec.mutable_placement()->set_pack("rak");
  EXPECT_EQ(ValidatePlacement(spec, levels).message(),
            "invalid job spec: placement.pack: \"rak\" is not a level of this cluster's "
            "--topology-levels (block, rack, host)");
  spec.mutable_placement()->set_pack("host");
  EXPECT_EQ(ValidatePlacement(spec, levels).message(),
            "invalid job spec: placement.spread: host is no narrower than placement.pack (host): "
            "one rank per host within one host is a single rank");
  spec.mutable_placement()->set_pack("rack");
  spec.set_ranks_per_worker(2);
  EXPECT_EQ(ValidatePlacement(spec, levels).message(),
            "invalid job spec: placement.spread: one rank per host and ranks_per_worker: 2 cannot "
            "both hold");
  spec.clear_ranks_per_worker();
  spec.mutable_placement()->set_mode("always");
  EXPECT_EQ(ValidatePlacement(spec, levels).message(),
            "invalid job spec: placement.mode: must be one of preferred, required, got \"always\"");
  spec.mutable_placement()->clear_pack();
  spec.mutable_placement()->set_mode("required");
  EXPECT_EQ(ValidatePlacement(spec, levels).message(),
            "invalid job spec: placement.mode: is for placement.pack (give the level to pack the "
            "job in)");
}

TEST(SpecValidationTest, TopologyLevelsAreNamesEachGivenOnce) {
  absl::StatusOr<std::vector<std::string>> levels = ParseTopologyLevels("block,rack,host");
  ASSERT_OK(levels);
  EXPECT_EQ(*levels, (std::vector<std::string>{"block", "rack", "host"}));
  EXPECT_TRUE(ParseTopologyLevels("")->empty());
  EXPECT_EQ(ParseTopologyLevels("rack,,host").status().message(),
            "--topology-levels: \"\" is not a level name (a label key without a prefix: 1-63 of "
            "[A-Za-z0-9._-])");
  EXPECT_EQ(ParseTopologyLevels("example.com/rack").status().message(),
            "--topology-levels: \"example.com/rack\" is not a level name (a label key without a "
            "prefix: 1-63 of [A-Za-z0-9._-])");
  EXPECT_EQ(ParseTopologyLevels("rack,host,rack").status().message(),
            "--topology-levels: \"rack\" is given twice");
}

TEST(SpecValidationTest, DefaultsFillTheGaps) {
  v1::JobSpec spec = TrainerJobSpec();
  ApplyJobSpecDefaults(&spec);
  EXPECT_EQ(spec.min_ranks(), 2);
  EXPECT_EQ(spec.trainer().batch_size(), 64);
  EXPECT_EQ(spec.trainer().optimizer().type(), "adamw");
  EXPECT_EQ(spec.trainer().lr_scaling(), "linear");
  EXPECT_EQ(spec.restart_policy(), "on_failure");
  EXPECT_EQ(spec.deadline_s(), 0) << "no deadline unless asked";
  EXPECT_OK(ValidateJobSpec(spec));
}

}  // namespace
}  // namespace ringmaster
