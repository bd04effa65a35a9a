#include "common/labels.h"
#include "testing/status_matchers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ringmaster {
namespace {

using ::testing::HasSubstr;

TEST(LabelsTest, AcceptsWhatKubernetesAccepts) {
  EXPECT_OK(ValidateLabel("team", "vision"));
  EXPECT_OK(ValidateLabel("example.com/zone", "us-east_1.a"));
  EXPECT_OK(ValidateLabel("gpu", "")) << "an empty value is a value";
  EXPECT_OK(ValidateLabel(std::string(63, 'k'), std::string(63, 'v')));
}

TEST(LabelsTest, RefusesWhatKubernetesRefusesSayingWhich) {
  EXPECT_THAT(ValidateLabel("", "x").message(), HasSubstr("the name must be 1-63"));
  EXPECT_THAT(ValidateLabel("-team", "x").message(), HasSubstr("label key \"-team\""));
  EXPECT_THAT(ValidateLabel(std::string(64, 'k'), "x").message(), HasSubstr("1-63"));
  EXPECT_THAT(ValidateLabel("Example.COM/zone", "a").message(), HasSubstr("prefix"));
  EXPECT_THAT(ValidateLabel("zone", "a b").message(), HasSubstr("value \"a b\""));
  EXPECT_THAT(ValidateLabel("zone", "a/b").message(), HasSubstr("value"));
  EXPECT_THAT(ValidateLabel("zone", "\n").message(), HasSubstr("\\n"));
}

TEST(LabelsTest, AnyTextBecomesAValue) {
  EXPECT_EQ(LabelValueOf("NVIDIA H100 80GB HBM3"), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(LabelValueOf(" (Tesla) T4 "), "Tesla-T4");
  EXPECT_EQ(LabelValueOf("???"), "");
  const std::string value = LabelValueOf(std::string(100, 'a') + "-b");
  EXPECT_EQ(value, std::string(63, 'a'));
  EXPECT_OK(ValidateLabel("gpu_type", LabelValueOf("A100-SXM4-40GB / MIG 1g.5gb")));
}

TEST(LabelsTest, ParsesKeyEqualsValue) {
  auto label = ParseLabel("zone=a=b");
  EXPECT_THAT(label, IsError()) << "'=' is not in a value";
  label = ParseLabel("zone=a");
  ASSERT_OK(label) << label.status();
  EXPECT_EQ(label->first, "zone");
  EXPECT_EQ(label->second, "a");
  EXPECT_THAT(ParseLabel("zone").status().message(), HasSubstr("is not key=value"));
  ASSERT_OK(ParseLabel("gpu="));
}

}  // namespace
}  // namespace ringmaster
