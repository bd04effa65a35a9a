// gRPC runs a reactor's callbacks on its own threads, one after another,
// ordered by locks inside libgrpc; Debian's gRPC is not instrumented, so
// ThreadSanitizer does not see that order and would report the reactor's
// own fields, written in one callback and read in the next, as races. These
// mark the order on the reactor: HandToGrpc before each operation it starts
// (StartRead, StartWrite, Finish), and a GrpcCallback for the length of each
// callback (OnDone only acquires: the reactor may be gone at its end). In
// every other build they compile to nothing.
#ifndef RINGMASTER_COMMON_GRPC_HANDOFF_H_
#define RINGMASTER_COMMON_GRPC_HANDOFF_H_

#include "absl/base/config.h"

#ifdef ABSL_HAVE_THREAD_SANITIZER
#include <sanitizer/tsan_interface.h>
#endif

namespace ringmaster {

#ifdef ABSL_HAVE_THREAD_SANITIZER
inline void HandToGrpc(const void* reactor) { __tsan_release(const_cast<void*>(reactor)); }
inline void BackFromGrpc(const void* reactor) { __tsan_acquire(const_cast<void*>(reactor)); }
#else
inline void HandToGrpc(const void*) {}
inline void BackFromGrpc(const void*) {}
#endif

class GrpcCallback {
 public:
  explicit GrpcCallback(const void* reactor) : reactor_(reactor) { BackFromGrpc(reactor_); }
  ~GrpcCallback() { HandToGrpc(reactor_); }
  GrpcCallback(const GrpcCallback&) = delete;
  GrpcCallback& operator=(const GrpcCallback&) = delete;

 private:
  const void* const reactor_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_GRPC_HANDOFF_H_
