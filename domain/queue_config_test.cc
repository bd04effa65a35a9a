#include "domain/queue_config.h"

#include <stdio.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

constexpr char kExample[] = R"(queues:
  - name: research
    weight: 2
    quota: {slots: 8, gpus: 8}
    limit: {slots: 16, gpus: 16}
    users: [alice, bob]
    max_running_jobs_per_user: 4
  - name: default
    quota: {slots: 4}
  - name: scavenger
priority_classes: {low: 0, normal: 100, high: 1000}
default_queue: default
)";

TEST(QueueConfigTest, ReadsTheDocumentedExample) {
  ASSERT_OK_AND_ASSIGN(QueueConfig config, ParseQueueConfig(kExample));
  ASSERT_EQ(config.queues.size(), 3u);
  const QueueSpec& research = config.queues[0];
  EXPECT_EQ(research.name, "research");
  EXPECT_EQ(research.weight, 2);
  EXPECT_EQ(research.quota, (SlotAmount{8, 8}));
  EXPECT_EQ(research.limit, (SlotAmount{16, 16}));
  EXPECT_EQ(research.users, (std::vector<std::string>{"alice", "bob"}));
  EXPECT_EQ(research.max_running_jobs_per_user, 4);
  // A limit left out is the quota; without a quota, nothing is guaranteed
  // and everything idle may be borrowed.
  EXPECT_EQ(config.queues[1].quota, (SlotAmount{4, 0}));
  EXPECT_EQ(config.queues[1].limit, (SlotAmount{4, 0}));
  EXPECT_EQ(config.queues[2].quota, (SlotAmount{0, 0}));
  EXPECT_TRUE(config.queues[2].limit.unlimited());
  EXPECT_EQ(config.priority_classes.at("high"), 1000);
  EXPECT_EQ(config.default_queue, "default");
}

TEST(QueueConfigTest, WithoutAFileThereIsOneQueueWithNoQuota) {
  QueueConfig config = DefaultQueueConfig();
  ASSERT_EQ(config.queues.size(), 1u);
  EXPECT_EQ(config.queues[0].name, "default");
  EXPECT_TRUE(config.queues[0].quota.unlimited());
  EXPECT_EQ(config.default_queue, "default");
  EXPECT_EQ(config.priority_classes.at("normal"), 100);
}

TEST(QueueConfigTest, EachMistakeIsRefusedNamingItsLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"queues:\n  - name: a\n    wieght: 2\n", "line 3: queues[0].wieght: unknown key"},
      {"queues:\n  - name: a\n    weight: -1\n", "line 3: queues[0].weight: must be a number"},
      {"queues:\n  - name: a\n  - name: a\n",
       "line 3: queues[1].name: queue \"a\" is already defined at line 2"},
      {"queues:\n  - name: a\n    quota: {slots: 8}\n    limit: {slots: 4}\n",
       "line 4: queues[0].limit: is below the quota"},
      {"queues:\n  - name: a\n    quota: {slots: many}\n",
       "line 3: queues[0].quota.slots: expected an integer, got \"many\""},
      {"queues:\n  - name: a\n    users: [Alice]\n", "line 3: queues[0].users[0]: user name"},
      {"queues:\n  - name: a\ndefault_queue: b\n",
       "line 3: default_queue: \"b\" is not one of the queues listed"},
      {"queues:\n  - name: default\npriority_classes: {low: 0}\n",
       "line 3: priority_classes: must define \"normal\""},
      {"queues:\n  - name: default\n   bad indent: [\n", "line 3"},
      {"queues: []\n", "line 1: queues: expected a list of at least one queue"},
      {"queue:\n  - name: default\n", "line 1: queue: unknown key"},
      {"queues:\n  - name: a\n    priority_classes: [urgent]\ndefault_queue: a\n",
       "line 3: queues[0].priority_classes[0]: \"urgent\" is not one of priority_classes"},
      {"queues:\n  - name: a\n    priority_classes: []\n",
       "line 3: queues[0].priority_classes: expected a list of class names"},
      {"queues:\n  - name: a\n    max_priority: 2000000000\n",
       "line 3: queues[0].max_priority: must be in [-1000000000, 1000000000]"},
      {"queues:\n  - name: a\n    allow_unpreemptible: yes\n",
       "line 3: queues[0].allow_unpreemptible: expected true or false"},
  };
  for (const auto& [text, expected] : cases) {
    absl::StatusOr<QueueConfig> config = ParseQueueConfig(text);
    ASSERT_THAT(config, IsError()) << text;
    EXPECT_THAT(config.status(), StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_EQ(config.status().message().substr(0, expected.size()), expected)
        << config.status().message();
  }
}

TEST(QueueConfigTest, AdmitsByQueueUsersAndPriority) {
  ASSERT_OK_AND_ASSIGN(QueueConfig config, ParseQueueConfig(kExample));
  v1::JobSpec spec;
  ASSERT_OK_AND_ASSIGN(QueueAdmission plain, AdmitToQueue(config, spec, "carol"));
  EXPECT_EQ(plain.queue, "default");
  EXPECT_EQ(plain.priority, 100);

  spec.set_queue("research");
  spec.set_priority("low");
  ASSERT_OK_AND_ASSIGN(QueueAdmission alice, AdmitToQueue(config, spec, "alice"));
  EXPECT_EQ(alice.queue, "research");
  EXPECT_EQ(alice.priority, 0);
  spec.set_priority("high");
  EXPECT_OK(AdmitToQueue(config, spec, "admin"));
  absl::Status carol = AdmitToQueue(config, spec, "carol").status();
  EXPECT_THAT(carol, StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_EQ(carol.message(),
            "queue: user carol may not submit to queue research; its users are alice, bob");

  spec.set_priority("250");
  EXPECT_EQ(AdmitToQueue(config, spec, "admin")->priority, 250);
  spec.set_priority("urgent");
  absl::Status unknown_class = AdmitToQueue(config, spec, "bob").status();
  EXPECT_THAT(unknown_class, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(unknown_class.message(),
            "priority: \"urgent\" is neither a priority class nor an integer; the classes are "
            "high (1000), low (0), normal (100)");
  spec.set_priority("");
  spec.set_queue("gpu");
  absl::Status unknown_queue = AdmitToQueue(config, spec, "bob").status();
  EXPECT_EQ(unknown_queue.message(),
            "queue: no queue \"gpu\"; the queues are research, default, scavenger");
}

// Kueue ties priority classes to who may use them, Slurm QOS to
// associations: a queue names the classes its users may use, the admin
// uses any class or integer.
constexpr char kClasses[] = R"(queues:
  - name: default
  - name: batch
    priority_classes: [background, low, normal]
  - name: prod
    priority_classes: [normal, high, urgent]
    max_priority: 1000
    allow_unpreemptible: true
priority_classes: {background: -10, low: 0, normal: 100, high: 1000, urgent: 5000}
)";

v1::JobSpec In(const std::string& queue, const std::string& priority) {
  v1::JobSpec spec;
  spec.set_queue(queue);
  spec.set_priority(priority);
  return spec;
}

TEST(QueueConfigTest, AQueueOpensTheClassesItListsUpToItsMaximum) {
  ASSERT_OK_AND_ASSIGN(QueueConfig config, ParseQueueConfig(kClasses));
  EXPECT_THAT(AdmitToQueue(config, In("batch", "background"), "bob"),
              IsOkAndHolds(::testing::Field(&QueueAdmission::priority, -10)));
  EXPECT_THAT(AdmitToQueue(config, In("prod", "high"), "bob"),
              IsOkAndHolds(::testing::Field(&QueueAdmission::priority, 1000)));
  EXPECT_THAT(AdmitToQueue(config, In("batch", "high"), "bob"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       "priority: class high (1000) is not open to users of queue batch; "
                       "theirs are background (-10), low (0), normal (100)"));
  // Listed, but over the queue's maximum.
  EXPECT_THAT(AdmitToQueue(config, In("prod", "urgent"), "bob"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       "priority: class urgent (5000) is not open to users of queue prod; "
                       "theirs are high (1000), normal (100)"));
  // A queue that lists none opens the classes up to normal's.
  EXPECT_THAT(AdmitToQueue(config, In("default", "high"), "bob"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       ::testing::HasSubstr("theirs are background (-10), low (0), normal (100)")));
  EXPECT_OK(AdmitToQueue(config, In("default", "urgent"), "admin"));
}

TEST(QueueConfigTest, AnIntegerPriorityIsTheAdminsAndNeverNegative) {
  ASSERT_OK_AND_ASSIGN(QueueConfig config, ParseQueueConfig(kClasses));
  EXPECT_THAT(AdmitToQueue(config, In("prod", "1000000"), "bob"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       "priority: an integer priority (1000000) is the admin's; users of queue "
                       "prod name a class: high (1000), normal (100)"));
  EXPECT_THAT(AdmitToQueue(config, In("prod", "1000000"), "admin"),
              IsOkAndHolds(::testing::Field(&QueueAdmission::priority, 1000000)));
  for (const char* out : {"-5", "99999999999", "-99999999999999999999999"}) {
    EXPECT_THAT(AdmitToQueue(config, In("prod", out), "admin"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         absl::StrCat("priority: ", out,
                                      " is out of range: an integer priority is in [0, "
                                      "1000000000] (a negative one comes only from a class)")));
  }
}

TEST(QueueConfigTest, PreemptibleFalseOnlyWhereTheQueueAllowsIt) {
  ASSERT_OK_AND_ASSIGN(QueueConfig config, ParseQueueConfig(kClasses));
  v1::JobSpec spec = In("batch", "normal");
  spec.set_preemptible(false);
  EXPECT_THAT(AdmitToQueue(config, spec, "bob"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       "preemptible: false is not allowed in queue batch (it does not set "
                       "allow_unpreemptible); leave it out"));
  EXPECT_OK(AdmitToQueue(config, spec, "admin"));
  spec.set_queue("prod");
  EXPECT_OK(AdmitToQueue(config, spec, "bob"));
  spec.set_queue("batch");
  spec.set_preemptible(true);
  EXPECT_OK(AdmitToQueue(config, spec, "bob"));
}

// The file is taken when asked, and when its bytes changed and stay so
// from one look to the next: also when a ConfigMap's new version is
// swapped in under the same name (a symbolic link moved), and when it was
// broken and is mended. Bytes seen once (a file being written) wait for
// the next look; a broken file is said once, not at each look.
TEST(QueuesFileTest, ReadsAgainWhenAskedOrWhenTheBytesChanged) {
  const std::string dir = testing::MakeTempDir("queues");
  const std::string path = dir + "/queues.yaml";
  auto version = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    ASSERT_EQ(symlink(name.c_str(), (dir + "/next").c_str()), 0);
    ASSERT_EQ(rename((dir + "/next").c_str(), path.c_str()), 0);
  };
  version("v1", "queues:\n  - {name: default, quota: {slots: 2}}\n");
  QueuesFile file(path);
  std::optional<absl::StatusOr<QueueConfig>> read = file.Read(true);
  ASSERT_TRUE(read.has_value()) << "at start it is asked for";
  ASSERT_OK(*read);
  EXPECT_EQ((*read)->Find("default")->quota.slots, 2);
  EXPECT_FALSE(file.Read(false).has_value()) << "unchanged";
  EXPECT_TRUE(file.Read(true).has_value()) << "asked";

  version("v2", "queues:\n  - {name: default, quota: {slots: 5}}\n");
  EXPECT_FALSE(file.Read(false).has_value()) << "new bytes wait for the next look";
  read = file.Read(false);
  ASSERT_TRUE(read.has_value()) << "a new version under the same name, seen twice";
  ASSERT_OK(*read);
  EXPECT_EQ((*read)->Find("default")->quota.slots, 5);

  // Half written, then whole: only the whole file is taken.
  std::ofstream(dir + "/v2", std::ios::trunc) << "queues:\n  - {name: default}\n";
  EXPECT_FALSE(file.Read(false).has_value());
  std::ofstream(dir + "/v2", std::ios::app) << "  - {name: capped, limit: {slots: 1}}\n";
  EXPECT_FALSE(file.Read(false).has_value()) << "still changing";
  read = file.Read(false);
  ASSERT_TRUE(read.has_value());
  ASSERT_OK(*read);
  EXPECT_NE((*read)->Find("capped"), nullptr);

  version("v3", "queues:\n  - {name: default, colour: red}\n");
  EXPECT_FALSE(file.Read(false).has_value());
  read = file.Read(false);
  ASSERT_TRUE(read.has_value());
  EXPECT_THAT(*read, StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr(path)));
  EXPECT_FALSE(file.Read(false).has_value()) << "the same broken bytes are said once";

  ASSERT_EQ(unlink(path.c_str()), 0);
  EXPECT_FALSE(file.Read(false).has_value());
  read = file.Read(false);
  ASSERT_TRUE(read.has_value()) << "gone is a change";
  EXPECT_THAT(*read, StatusIs(absl::StatusCode::kInvalidArgument, path + ": cannot read it"));
  version("v4", "queues:\n  - {name: default}\n");
  EXPECT_FALSE(file.Read(false).has_value());
  read = file.Read(false);
  ASSERT_TRUE(read.has_value()) << "mended";
  EXPECT_OK(*read);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ringmaster
