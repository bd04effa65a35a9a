#include "coordinator/api/console_session.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/fake_clock.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;

class ConsoleSessionsTest : public ::testing::Test {
 protected:
  std::string Code(const std::string& who, const std::string& nonce) {
    return signer_.Login(who, nonce, clock_.Now() + absl::Minutes(2));
  }
  std::string Cookie(const ConsoleSession& s) {
    return absl::StrCat("a=b; ", kSessionCookie, "=", s.token);
  }

  CredentialSigner signer_{"key"};
  FakeClock clock_;
  ConsoleSessions sessions_{&signer_, &clock_};
};

// A code opens one session of its caller, once; the session's cookie
// gives it back with its CSRF token until it expires.
TEST_F(ConsoleSessionsTest, ACodeOpensOneSessionOnceUntilItExpires) {
  absl::StatusOr<ConsoleSession> opened = sessions_.Redeem(Code("alice", "n1"));
  ASSERT_OK(opened);
  EXPECT_EQ(opened->who, "alice");
  EXPECT_EQ(opened->expires, clock_.Now() + ConsoleSessions::kLifetime);
  EXPECT_EQ(opened->csrf, signer_.Csrf(opened->token));
  EXPECT_THAT(sessions_.Redeem(Code("alice", "n1")),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("used already")));

  absl::StatusOr<std::optional<ConsoleSession>> back = sessions_.FromCookies(Cookie(*opened));
  ASSERT_OK(back);
  ASSERT_TRUE(back->has_value());
  EXPECT_EQ((*back)->who, "alice");
  EXPECT_EQ((*back)->csrf, opened->csrf);

  clock_.Advance(ConsoleSessions::kLifetime);
  EXPECT_THAT(sessions_.FromCookies(Cookie(*opened)),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("sign in again")));
}

TEST_F(ConsoleSessionsTest, NoCookieIsNoSessionAndAnotherCredentialIsNone) {
  absl::StatusOr<std::optional<ConsoleSession>> none = sessions_.FromCookies("a=b");
  ASSERT_OK(none);
  EXPECT_FALSE(none->has_value());
  // A user token is a credential, but not a session's.
  EXPECT_THAT(sessions_.FromCookies(absl::StrCat(kSessionCookie, "=", signer_.User("bob"))),
              StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(sessions_.FromCookies(absl::StrCat(kSessionCookie, "=forged.abc")),
              StatusIs(absl::StatusCode::kUnauthenticated));
}

TEST_F(ConsoleSessionsTest, AnExpiredOrForeignCodeOpensNothing) {
  const std::string code = Code("alice", "n2");
  clock_.Advance(absl::Minutes(2));
  EXPECT_THAT(sessions_.Redeem(code),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("expired")));
  CredentialSigner other("other key");
  EXPECT_THAT(sessions_.Redeem(other.Login("admin", "n3", clock_.Now() + absl::Minutes(2))),
              StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(sessions_.Redeem(signer_.Session("admin", clock_.Now() + absl::Hours(1))),
              StatusIs(absl::StatusCode::kUnauthenticated));
}

// The codes remembered are bounded: those expired are forgotten, and
// beyond the bound a sign-in waits rather than a code being taken twice.
TEST_F(ConsoleSessionsTest, TheCodesTakenAreBoundedAndForgottenWhenExpired) {
  for (size_t i = 0; i < ConsoleSessions::kMaxTakenCodes; ++i) {
    const std::string user = absl::StrCat("user", i / ConsoleSessions::kMaxTakenCodesPerCaller);
    ASSERT_OK(sessions_.Redeem(Code(user, absl::StrCat("n", i))));
  }
  EXPECT_THAT(sessions_.Redeem(Code("alice", "one more")),
              StatusIs(absl::StatusCode::kResourceExhausted));
  clock_.Advance(absl::Minutes(2));
  EXPECT_OK(sessions_.Redeem(Code("alice", "one more")));
}

// One caller's sign-ins are bounded on their own: another still signs in.
TEST_F(ConsoleSessionsTest, OneCallersSignInsLeaveRoomForTheOthers) {
  for (int i = 0; i < ConsoleSessions::kMaxTakenCodesPerCaller; ++i) {
    ASSERT_OK(sessions_.Redeem(Code("mallory", absl::StrCat("m", i))));
  }
  EXPECT_THAT(sessions_.Redeem(Code("mallory", "one more")),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_OK(sessions_.Redeem(Code("alice", "a1")));
  clock_.Advance(absl::Minutes(2));
  EXPECT_OK(sessions_.Redeem(Code("mallory", "one more")));
}

// Peek says whom a code signs in, and takes nothing.
TEST_F(ConsoleSessionsTest, PeekTakesNothing) {
  const std::string code = Code("alice", "p1");
  EXPECT_EQ(*sessions_.Peek(code), "alice");
  EXPECT_EQ(*sessions_.Peek(code), "alice");
  ASSERT_OK(sessions_.Redeem(code));
  EXPECT_THAT(sessions_.Peek(code),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("used already")));
}

// Two session cookies (a page of another port of the host may set one) are
// none that counts.
TEST_F(ConsoleSessionsTest, TwoSessionCookiesAreRefused) {
  absl::StatusOr<ConsoleSession> a = sessions_.Redeem(Code("alice", "c1"));
  absl::StatusOr<ConsoleSession> b = sessions_.Redeem(Code("bob", "c2"));
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_THAT(sessions_.FromCookies(absl::StrCat(Cookie(*a), "; ", kSessionCookie, "=", b->token)),
              StatusIs(absl::StatusCode::kUnauthenticated));
}

TEST_F(ConsoleSessionsTest, TheSessionCookieIsHttpOnlyStrictAndExpires) {
  absl::StatusOr<ConsoleSession> opened = sessions_.Redeem(Code("admin", "n4"));
  ASSERT_OK(opened);
  std::vector<std::string> set = ConsoleSessions::SetCookies(*opened, true, clock_.Now());
  ASSERT_EQ(set.size(), 2u);
  EXPECT_EQ(set[0], absl::StrCat(kSessionCookie, "=", opened->token,
                                 "; Path=/; Max-Age=43200; SameSite=Strict; Secure; HttpOnly"));
  EXPECT_EQ(set[1], absl::StrCat(kCsrfCookie, "=", opened->csrf,
                                 "; Path=/; Max-Age=43200; SameSite=Strict; Secure"));
  std::vector<std::string> forget = ConsoleSessions::SetCookies(std::nullopt, false, clock_.Now());
  EXPECT_EQ(forget[0],
            absl::StrCat(kSessionCookie, "=; Path=/; Max-Age=0; SameSite=Strict; HttpOnly"));
}

}  // namespace
}  // namespace ringmaster
