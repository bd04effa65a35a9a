// The web console's sign-in. `ringmaster ui` asks for a one-time code
// (CreateConsoleLogin) and the browser opens /login?code=...; or the
// person pastes a token, which the gateway turns into such a code. The
// code becomes a session: a signed credential of the same caller that
// expires, held in an HttpOnly, SameSite=Strict cookie, and a CSRF token
// that every change made with the cookie must carry in X-CSRF-Token. The
// session is signed with the cluster's key, so every coordinator sharing
// the key takes it.
#ifndef RINGMASTER_COORDINATOR_API_CONSOLE_SESSION_H_
#define RINGMASTER_COORDINATOR_API_CONSOLE_SESSION_H_

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/credentials.h"
#include "common/mutex.h"

namespace ringmaster {

inline constexpr absl::string_view kSessionCookie = "ringmaster_session";
inline constexpr absl::string_view kCsrfCookie = "ringmaster_csrf";
inline constexpr absl::string_view kCsrfHeader = "X-CSRF-Token";

struct ConsoleSession {
  std::string token;  // the cookie: a credential of `who`
  std::string csrf;
  std::string who;  // "admin" or a user name
  absl::Time expires;
};

// Thread-safe.
class ConsoleSessions {
 public:
  static constexpr absl::Duration kLifetime = absl::Hours(12);
  // Codes taken and not yet expired, remembered so that none is taken
  // twice: at most this many at once.
  static constexpr size_t kMaxTakenCodes = 4096;
  // ... and of one caller's: one user cannot keep the others from signing in.
  static constexpr int kMaxTakenCodesPerCaller = 32;

  ConsoleSessions(const CredentialSigner* signer, const Clock* clock)
      : signer_(signer), clock_(clock) {}

  // The session a sign-in code opens. UNAUTHENTICATED when the code is not
  // this cluster's, has expired or was taken already.
  absl::StatusOr<ConsoleSession> Redeem(absl::string_view code) ABSL_LOCKS_EXCLUDED(mu_);
  // Whom a code would sign in, without taking it; the same errors.
  absl::StatusOr<std::string> Peek(absl::string_view code) ABSL_LOCKS_EXCLUDED(mu_);

  // The session of a request's Cookie header: nullopt when it has none;
  // UNAUTHENTICATED when it has one that is not (or no longer) valid, or
  // two (a page of another port of the host may set one).
  absl::StatusOr<std::optional<ConsoleSession>> FromCookies(absl::string_view cookie_header) const;

  // The Set-Cookie header values that hold `session` (or, with nullopt,
  // that forget it). `secure`: served over TLS.
  static std::vector<std::string> SetCookies(const std::optional<ConsoleSession>& session,
                                             bool secure, absl::Time now);

 private:
  const CredentialSigner* const signer_;
  const Clock* const clock_;
  Mutex mu_;
  // `code`, when it is this cluster's, unexpired and not taken.
  absl::StatusOr<CredentialSigner::LoginCode> Unused(absl::string_view code, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the codes expired.
  void Prune(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct Taken {
    absl::Time expires;  // the code's
    std::string who;
  };
  std::map<std::string, Taken> taken_ ABSL_GUARDED_BY(mu_);   // by nonce
  std::map<std::string, int> taken_by_ ABSL_GUARDED_BY(mu_);  // how many of taken_ are whose
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_API_CONSOLE_SESSION_H_
