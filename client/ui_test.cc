#include "client/ui.h"

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

TEST(ConsoleBaseUrlTest, TheCoordinatorsHostWithItsHttpPort) {
  EXPECT_EQ(*ConsoleBaseUrl("", "10.0.0.5:7070", true, 7072), "https://10.0.0.5:7072");
  EXPECT_EQ(*ConsoleBaseUrl("", "a.example:7070,b.example:7070", false, 8000),
            "http://a.example:8000");
  EXPECT_EQ(*ConsoleBaseUrl("", "[::1]:7070", true, 7072), "https://[::1]:7072");
}

TEST(ConsoleBaseUrlTest, AUrlGivenWinsAndIsChecked) {
  EXPECT_EQ(*ConsoleBaseUrl("https://console.example/", "h:7070", true, 0),
            "https://console.example");
  EXPECT_THAT(ConsoleBaseUrl("console.example", "h:7070", true, 7072),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("--url")));
}

TEST(ConsoleBaseUrlTest, NoHttpPortIsSaid) {
  EXPECT_THAT(
      ConsoleBaseUrl("", "h:7070", true, 0),
      StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::HasSubstr("--http-port 0")));
}

}  // namespace
}  // namespace ringmaster
