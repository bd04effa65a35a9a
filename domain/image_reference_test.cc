#include "domain/image_reference.h"

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

std::string CanonicalOf(const std::string& text) {
  absl::StatusOr<ImageReference> ref = ParseImageReference(text);
  EXPECT_OK(ref) << text;
  return ref.ok() ? ref->Canonical() : "";
}

TEST(ImageReferenceTest, ARegistryAPathATagAndADigest) {
  absl::StatusOr<ImageReference> ref = ParseImageReference("registry.example:5000/team/train:1.2");
  ASSERT_OK(ref);
  EXPECT_EQ(ref->registry, "registry.example:5000");
  EXPECT_EQ(ref->repository, "team/train");
  EXPECT_EQ(ref->tag, "1.2");
  EXPECT_EQ(ref->digest, "");
  EXPECT_EQ(ref->Transport(), "docker://registry.example:5000/team/train:1.2");

  const std::string digest = "sha256:" + std::string(64, 'a');
  ref = ParseImageReference("127.0.0.1:5443/team/train@" + digest);
  ASSERT_OK(ref);
  EXPECT_EQ(ref->registry, "127.0.0.1:5443");
  EXPECT_EQ(ref->tag, "");
  EXPECT_EQ(ref->digest, digest);
  EXPECT_EQ(CanonicalOf("localhost/a/b:2@" + digest), "localhost/a/b:2@" + digest);
}

TEST(ImageReferenceTest, WithoutARegistryItIsDockerHubsAndWithoutATagLatest) {
  EXPECT_EQ(CanonicalOf("python"), "docker.io/library/python:latest");
  EXPECT_EQ(CanonicalOf("team/train:1.2"), "docker.io/team/train:1.2");
  EXPECT_EQ(CanonicalOf("localhost/train"), "localhost/train:latest");
  EXPECT_EQ(CanonicalOf("a.b/c__d/e-f--g.h_i"), "a.b/c__d/e-f--g.h_i:latest");
}

TEST(ImageReferenceTest, BadReferencesAreRefusedNamingWhatIsWrong) {
  struct Case {
    std::string text, why;
  };
  const std::vector<Case> cases = {
      {"", "it is empty"},
      {"Team/train", "\"Team\" is not a path component"},
      {"team//train", "\"\" is not a path component"},
      {"team/train-", "\"train-\" is not a path component"},
      {"team/train:", "a tag is at most 128"},
      {"team/train:-x", "got \"-x\""},
      {"team/train:" + std::string(129, 'x'), "a tag is at most 128"},
      {"team/train@sha256:abc", "a digest is sha256: and 64 lowercase hex digits"},
      {"team/train@md5:" + std::string(32, '0'), "a digest is sha256:"},
      {"reg.example:99999/train", "\"reg.example:99999\" is not a registry host[:port]"},
      {"-reg.example/train", "\"-reg.example\" is not a registry"},
      {"reg.example/" + std::string(250, 'a'), "its name is 262 characters; at most 255"},
      {"team/tr ain", "\"tr ain\" is not a path component"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseImageReference(c.text),
                StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr(c.why)))
        << c.text;
    if (!c.text.empty()) {
      EXPECT_THAT(ParseImageReference(c.text),
                  StatusIs(absl::StatusCode::kInvalidArgument,
                           ::testing::StartsWith("\"" + c.text + "\" is not an image reference")));
    }
  }
}

}  // namespace
}  // namespace ringmaster
