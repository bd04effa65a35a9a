#include "coordinator/api/console_session.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringmaster {
namespace {

// The value of cookie `name` in a Cookie header ("a=1; b=2"); empty when
// it has none.
absl::string_view CookieValue(absl::string_view header, absl::string_view name) {
  for (absl::string_view pair : absl::StrSplit(header, ';')) {
    pair = absl::StripAsciiWhitespace(pair);
    if (absl::ConsumePrefix(&pair, name) && absl::ConsumePrefix(&pair, "=")) return pair;
  }
  return "";
}

}  // namespace

absl::StatusOr<ConsoleSession> ConsoleSessions::Redeem(absl::string_view code) {
  const absl::Time now = clock_->Now();
  std::optional<CredentialSigner::LoginCode> login = signer_->VerifyLogin(code, now);
  if (!login) {
    return absl::UnauthenticatedError(
        "the sign-in code is not this cluster's or has expired: run `ringmaster ui` again");
  }
  {
    MutexLock lock(&mu_);
    for (auto it = taken_.begin(); it != taken_.end();) {
      it = it->second <= now ? taken_.erase(it) : std::next(it);
    }
    if (taken_.count(login->nonce) > 0) {
      return absl::UnauthenticatedError(
          "the sign-in code was used already: run `ringmaster ui` again for another");
    }
    if (taken_.size() >= kMaxTakenCodes) {
      return absl::ResourceExhaustedError(
          absl::StrCat(kMaxTakenCodes, " sign-ins in the last minutes, the most taken; try later"));
    }
    taken_.emplace(login->nonce, login->expires);
  }
  ConsoleSession session;
  session.who = login->who;
  session.expires = now + kLifetime;
  session.token = signer_->Session(session.who, session.expires);
  session.csrf = signer_->Csrf(session.token);
  return session;
}

absl::StatusOr<std::optional<ConsoleSession>> ConsoleSessions::FromCookies(
    absl::string_view cookie_header) const {
  const absl::string_view token = CookieValue(cookie_header, kSessionCookie);
  if (token.empty()) return std::nullopt;
  std::optional<Caller> caller = signer_->Verify(token, clock_->Now());
  if (!caller || caller->expires == absl::InfiniteFuture()) {
    return absl::UnauthenticatedError("the console's session has ended: sign in again");
  }
  ConsoleSession session;
  session.token = std::string(token);
  session.csrf = signer_->Csrf(token);
  session.who = caller->role == Caller::Role::kAdmin ? std::string(kAdminUser) : caller->id;
  session.expires = caller->expires;
  return session;
}

std::vector<std::string> ConsoleSessions::SetCookies(const std::optional<ConsoleSession>& session,
                                                     bool secure, absl::Time now) {
  const int64_t max_age =
      session ? std::max<int64_t>(0, absl::ToInt64Seconds(session->expires - now)) : 0;
  const std::string attributes =
      absl::StrCat("; Path=/; Max-Age=", max_age, "; SameSite=Strict", secure ? "; Secure" : "");
  // The CSRF token is for the console's script to read and send back; the
  // session is for the browser alone.
  return {
      absl::StrCat(kSessionCookie, "=", session ? session->token : "", attributes, "; HttpOnly"),
      absl::StrCat(kCsrfCookie, "=", session ? session->csrf : "", attributes)};
}

}  // namespace ringmaster
