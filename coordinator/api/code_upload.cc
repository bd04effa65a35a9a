#include "coordinator/api/code_upload.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_handoff.h"
#include "common/grpc_status.h"

namespace ringmaster {

// Writes an uploaded code archive to the store as its pieces arrive (each
// at most kMaxCodeChunkBytes, written before the next is read, so one upload
// holds one piece in memory).
class UploadReactor final : public grpc::ServerReadReactor<v1::UploadCodeRequest> {
 public:
  UploadReactor(CodeUploads* uploads, v1::UploadCodeResponse* response, std::string caller)
      : uploads_(uploads), response_(response), caller_(std::move(caller)) {
    HandToGrpc(this);
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    GrpcCallback callback(this);
    if (!ok) return Commit();  // the client has sent everything
    uploads_->Touch(this);
    if (upload_ == nullptr) {
      absl::StatusOr<std::unique_ptr<CodeStore::Upload>> upload =
          uploads_->store_->BeginUpload(request_.sha256(), request_.archive_bytes(), caller_);
      if (!upload.ok()) return End(upload.status());
      upload_ = *std::move(upload);
    }
    if (request_.data().size() > static_cast<size_t>(kMaxCodeChunkBytes)) {
      return End(
          absl::InvalidArgumentError(absl::StrCat("an upload's piece is ", request_.data().size(),
                                                  " bytes; at most ", kMaxCodeChunkBytes)));
    }
    if (absl::Status s = upload_->Append(request_.data()); !s.ok()) return End(s);
    HandToGrpc(this);
    StartRead(&request_);
  }
  void OnCancel() override {}
  void OnDone() override {
    BackFromGrpc(this);
    if (uploads_->Done(this)) delete this;  // an unfinished upload leaves nothing
  }

  // From EndIdle's thread, while a read waits.
  void EndIdle(absl::Duration idle) {
    End(absl::DeadlineExceededError(
        absl::StrCat("the upload received nothing for ", absl::FormatDuration(idle), "; ended")));
  }

 private:
  void Commit() {
    if (upload_ == nullptr) {
      return End(absl::InvalidArgumentError("an upload without its sha256 and size"));
    }
    absl::StatusOr<bool> already = upload_->Commit();
    if (already.ok()) response_->set_already_stored(*already);
    End(already.status());
  }
  // Once only, whichever thread comes first; the upload itself goes with
  // the reactor.
  void End(const absl::Status& status) {
    {
      MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
    }
    HandToGrpc(this);
    Finish(ToGrpcStatus(status));
  }

  CodeUploads* const uploads_;
  v1::UploadCodeResponse* const response_;
  const std::string caller_;
  v1::UploadCodeRequest request_;
  std::unique_ptr<CodeStore::Upload> upload_;
  Mutex mu_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

grpc::ServerReadReactor<v1::UploadCodeRequest>* CodeUploads::Start(v1::UploadCodeResponse* response,
                                                                   const std::string& caller) {
  auto* stream = new UploadReactor(this, response, caller);
  MutexLock lock(&mu_);
  streams_[stream].last_piece = absl::Now();
  return stream;
}

void CodeUploads::Touch(UploadReactor* stream) {
  MutexLock lock(&mu_);
  if (auto it = streams_.find(stream); it != streams_.end()) it->second.last_piece = absl::Now();
}

bool CodeUploads::Done(UploadReactor* stream) {
  MutexLock lock(&mu_);
  auto it = streams_.find(stream);
  if (it != streams_.end() && it->second.ending) {
    it->second.done = true;
    return false;
  }
  if (it != streams_.end()) streams_.erase(it);
  return true;
}

void CodeUploads::EndIdle(absl::Time now) {
  std::vector<UploadReactor*> idle;
  {
    MutexLock lock(&mu_);
    for (auto& [stream, state] : streams_) {
      if (!state.ended && now - state.last_piece >= idle_timeout_) {
        state.ended = state.ending = true;
        idle.push_back(stream);
      }
    }
  }
  // Finish may run the stream's last callbacks here, OnDone included.
  for (UploadReactor* stream : idle) stream->EndIdle(idle_timeout_);
  std::vector<UploadReactor*> finished;
  {
    MutexLock lock(&mu_);
    for (UploadReactor* stream : idle) {
      auto it = streams_.find(stream);
      if (it->second.done) {
        finished.push_back(stream);
        streams_.erase(it);
      } else {
        it->second.ending = false;  // OnDone deletes it
      }
    }
  }
  for (UploadReactor* stream : finished) delete stream;
}

}  // namespace ringmaster
