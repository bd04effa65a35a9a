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
