// Early-return helpers for absl::Status and absl::StatusOr (absl 20220623
// ships none), and the status of a failed system call.
#ifndef RINGMASTER_COMMON_STATUS_MACROS_H_
#define RINGMASTER_COMMON_STATUS_MACROS_H_

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace ringmaster {

// INTERNAL "<what>: <strerror(errno)>", right after a system call failed.
inline absl::Status ErrnoError(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace ringmaster

// Returns the status of `expr` from the enclosing function when it is not OK.
#define RETURN_IF_ERROR(expr)                                \
  do {                                                       \
    ::absl::Status ringmaster_status_ = (expr);              \
    if (!ringmaster_status_.ok()) return ringmaster_status_; \
  } while (false)

#define RINGMASTER_CONCAT_INNER_(a, b) a##b
#define RINGMASTER_CONCAT_(a, b) RINGMASTER_CONCAT_INNER_(a, b)

// `ASSIGN_OR_RETURN(auto x, MakeX());` assigns the value of an OK StatusOr,
// or returns its status from the enclosing function.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(RINGMASTER_CONCAT_(ringmaster_or_, __LINE__), lhs, expr)

#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()

#endif  // RINGMASTER_COMMON_STATUS_MACROS_H_
