// Default bounds on what callers send, shared by the daemons' flags and the
// CLI (which checks the spec's size before sending it, for an early and
// clear error).
#ifndef RINGMASTER_COMMON_LIMITS_H_
#define RINGMASTER_COMMON_LIMITS_H_

#include <cstdint>

namespace ringmaster {

inline constexpr int64_t kDefaultMaxSpecBytes = 1 << 20;   // a job spec (--max-spec-bytes)
inline constexpr int64_t kDefaultMaxEnvBytes = 256 << 10;  // a spec's env in all
inline constexpr int64_t kMaxEnvEntryBytes = 128 << 10;    // one KEY=VALUE: Linux's MAX_ARG_STRLEN
inline constexpr int64_t kDefaultMaxRendezvousValueBytes = 1 << 20;  // one value
inline constexpr int64_t kDefaultMaxRendezvousScopeBytes = 16
                                                           << 20;  // keys and values of an attempt
inline constexpr int64_t kDefaultMaxLogLineBytes = 64 << 10;       // longer lines are split
inline constexpr int kDefaultMaxStreamQueue = 10000;               // messages waiting on one stream
// A code archive travels in pieces of at most this many bytes: each upload
// message, and each ReadCode answer a worker fetches.
inline constexpr int kMaxCodeChunkBytes = 1 << 20;

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_LIMITS_H_
