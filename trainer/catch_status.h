// Gloo (and its rendezvous stores) report errors by exception; this is the
// one place they become absl::Status.
#ifndef RINGMASTER_TRAINER_CATCH_STATUS_H_
#define RINGMASTER_TRAINER_CATCH_STATUS_H_

#include <exception>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ringmaster {

// Runs `body`; an exception becomes UNAVAILABLE "<what>: <message>".
template <typename F>
absl::Status CatchAsStatus(const std::string& what, F body) {
  try {
    body();
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(what, ": ", e.what()));
  }
}

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_CATCH_STATUS_H_
