// UploadCode's streams: each writes its pieces to the code store as they
// arrive, and one that receives nothing for the idle timeout is ended, so a
// client that stalls holds no upload slot for long.
#ifndef RINGMASTER_COORDINATOR_API_CODE_UPLOAD_H_
#define RINGMASTER_COORDINATOR_API_CODE_UPLOAD_H_

#include <map>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/time/time.h"
#include "common/mutex.h"
#include "coordinator/code/code_store.h"
#include "proto/job.grpc.pb.h"

namespace ringmaster {

class UploadReactor;

// Thread-safe: one mutex over the streams in progress. Calls into a stream
// (to end it) outside the mutex.
class CodeUploads {
 public:
  CodeUploads(CodeStore* store, absl::Duration idle_timeout)
      : store_(store), idle_timeout_(idle_timeout) {}
  // Every stream has ended before the destructor runs (the server is down).

  // A stream for `caller` (who counts against the store's per-caller limit).
  grpc::ServerReadReactor<v1::UploadCodeRequest>* Start(v1::UploadCodeResponse* response,
                                                        const std::string& caller);
  // Ends, with DEADLINE_EXCEEDED, every stream that has received nothing
  // for the idle timeout by `now`.
  void EndIdle(absl::Time now);

 private:
  friend class UploadReactor;
  struct Stream {
    absl::Time last_piece;
    bool ended = false;   // by EndIdle
    bool ending = false;  // EndIdle is ending it, outside the mutex
    bool done = false;    // and gRPC is done with it meanwhile
  };
  void Touch(UploadReactor* stream);
  // gRPC is done with the stream: true when the caller deletes it, false
  // when EndIdle will.
  bool Done(UploadReactor* stream);

  CodeStore* const store_;
  const absl::Duration idle_timeout_;
  Mutex mu_;
  std::map<UploadReactor*, Stream> streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_API_CODE_UPLOAD_H_
