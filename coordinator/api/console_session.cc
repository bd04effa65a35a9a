#include "coordinator/api/console_session.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

// The values of cookie `name` in a Cookie header ("a=1; b=2").
std::vector<absl::string_view> CookieValues(absl::string_view header, absl::string_view name) {
  std::vector<absl::string_view> values;
  for (absl::string_view pair : absl::StrSplit(header, ';')) {
    pair = absl::StripAsciiWhitespace(pair);
    if (absl::ConsumePrefix(&pair, name) && absl::ConsumePrefix(&pair, "=")) {
      values.push_back(pair);
    }
  }
  return values;
}

}  // namespace

void ConsoleSessions::Prune(absl::Time now) {
  for (auto it = taken_.begin(); it != taken_.end();) {
    if (it->second.expires > now) {
      ++it;
      continue;
    }
    if (--taken_by_[it->second.who] == 0) taken_by_.erase(it->second.who);
    it = taken_.erase(it);
  }
}

absl::StatusOr<CredentialSigner::LoginCode> ConsoleSessions::Unused(absl::string_view code,
                                                                    absl::Time now) {
  std::optional<CredentialSigner::LoginCode> login = signer_->VerifyLogin(code, now);
  if (!login) {
    return absl::UnauthenticatedError(
        "the sign-in code is not this cluster's or has expired: run `ringmaster ui` again");
  }
  Prune(now);
  if (taken_.count(login->nonce) > 0) {
    return absl::UnauthenticatedError(
        "the sign-in code was used already: run `ringmaster ui` again for another");
  }
  return *std::move(login);
}

absl::StatusOr<std::string> ConsoleSessions::Peek(absl::string_view code) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(CredentialSigner::LoginCode login, Unused(code, clock_->Now()));
  return login.who;
}

absl::StatusOr<ConsoleSession> ConsoleSessions::Redeem(absl::string_view code) {
  const absl::Time now = clock_->Now();
  ConsoleSession session;
  {
    MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(CredentialSigner::LoginCode login, Unused(code, now));
    if (taken_.size() >= kMaxTakenCodes || taken_by_[login.who] >= kMaxTakenCodesPerCaller) {
      return absl::ResourceExhaustedError(
          absl::StrCat("too many sign-ins in the last two minutes (", kMaxTakenCodesPerCaller,
                       " each, ", kMaxTakenCodes, " in all); try again later"));
    }
    taken_.emplace(login.nonce, Taken{login.expires, login.who});
    ++taken_by_[login.who];
    session.who = login.who;
  }
  session.expires = now + kLifetime;
  session.token = signer_->Session(session.who, session.expires);
  session.csrf = signer_->Csrf(session.token);
  return session;
}

absl::StatusOr<std::optional<ConsoleSession>> ConsoleSessions::FromCookies(
    absl::string_view cookie_header) const {
  const std::vector<absl::string_view> tokens = CookieValues(cookie_header, kSessionCookie);
  if (tokens.empty() || (tokens.size() == 1 && tokens[0].empty())) return std::nullopt;
  const absl::string_view token = tokens[0];
  std::optional<Caller> caller = tokens.size() == 1 && IsSessionToken(token)
                                     ? signer_->Verify(token, clock_->Now())
                                     : std::nullopt;
  if (!caller) {
    return absl::UnauthenticatedError("the console's session has ended: sign in again");
  }
  ConsoleSession session;
  session.token = std::string(token);
  session.csrf = signer_->Csrf(token);
  session.who = OwnerName(*caller);
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
