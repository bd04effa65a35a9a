#include "trainer/step_streams.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster {

absl::StatusOr<std::unique_ptr<StepStreams>> StepStreams::Create(StreamApi* api, int device,
                                                                 Stream compute, Stream comm,
                                                                 int params) {
  std::unique_ptr<StepStreams> streams(new StepStreams(api, device, compute, comm));
  RETURN_IF_ERROR(streams->EnterThread());
  for (int p = 0; p < params; ++p) {
    ASSIGN_OR_RETURN(StreamApi::Event event, api->CreateEvent());
    streams->gradient_ready_.push_back(event);
  }
  ASSIGN_OR_RETURN(streams->step_done_, api->CreateEvent());
  return streams;
}

StepStreams::~StepStreams() {
  for (StreamApi::Event event : gradient_ready_) api_->DestroyEvent(event);
  if (step_done_ != nullptr) api_->DestroyEvent(step_done_);
}

absl::Status CheckDevice(StreamApi& api, int device) {
  ASSIGN_OR_RETURN(const int current, api.GetDevice());
  if (current == device) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("CUDA work for device ", device,
                                                    " issued from a thread on device ", current,
                                                    "; the thread must call EnterThread first"));
}

absl::Status StepStreams::GradientReady(int param) {
  RETURN_IF_ERROR(CheckDevice());
  return api_->Record(gradient_ready_.at(param), compute_);
}

absl::Status StepStreams::BeforeReduce(const Bucket& bucket) {
  RETURN_IF_ERROR(CheckDevice());
  // Backward order: the bucket's last parameter is the last one written.
  return api_->Wait(comm_, gradient_ready_.at(bucket.params.back()));
}

absl::Status StepStreams::AfterStep() {
  RETURN_IF_ERROR(CheckDevice());
  RETURN_IF_ERROR(api_->Record(step_done_, comm_));
  return api_->Wait(compute_, step_done_);
}

}  // namespace ringmaster
