#include "trainer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "trainer/checkpoint.h"
#include "trainer/checkpoint_writer.h"
#include "trainer/optimizer.h"
#include "trainer/reducer.h"
#include "trainer/resume.h"
#include "trainer/sampler.h"

namespace ringmaster {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

std::vector<int> Widths(const v1::TrainerSpec& spec, const Dataset& data) {
  std::vector<int> widths = {data.features};
  for (int h : spec.model().hidden()) widths.push_back(h);
  widths.push_back(data.classes);
  return widths;
}

// One call of Train: the state its steps share. It stays where it is made
// (the reducer's callbacks hold `this`).
class TrainingRun {
 public:
  TrainingRun(const v1::TrainerSpec& spec, const TrainTestSplit& data,
              const TrainerContext& context)
      : spec_(spec),
        train_(data.train),
        test_(data.test),
        context_(context),
        comm_(context.comm),
        rank_(comm_->rank()),
        world_(comm_->size()),
        seed_(static_cast<uint64_t>(spec.seed())),
        batch_(std::max(1, spec.batch_size())),
        accum_(std::max(1, spec.grad_accum_steps())),
        sampler_(train_.rows, rank_, world_, seed_),
        now_(context.now ? context.now : [] { return Clock::now(); }),
        checkpoint_every_(std::chrono::seconds(spec.checkpoint_every_s())) {}
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  // The model, resumed from the newest checkpoint or broadcast from rank 0;
  // the steps to go; the reducer.
  absl::Status Start();
  int64_t first_epoch() const { return position_.epoch; }
  // Trains one epoch and evaluates it; false when the run stopped in it
  // (stop_requested, or a test's stop_after_step).
  absl::StatusOr<bool> Epoch(int64_t epoch);
  // The result of a run that stopped, or of one that trained every epoch.
  absl::StatusOr<TrainResult> Stopped();
  absl::StatusOr<TrainResult> Finish();

 private:
  // Waits for the checkpoint being written and the snapshot being
  // committed, and puts their figures into the result.
  absl::Status Drain();
  // Steps of an epoch from its row `start` on, at this world size.
  int64_t StepsFrom(int64_t start) const { return sampler_.rows_per_rank(start) / batch_ / accum_; }
  absl::Status MakeReducer();
  void LoadBatch(const std::vector<int64_t>& indices, int64_t b);
  // Forward and backward of one micro-batch; the last of a step starts its
  // all-reduce, bucket by bucket as backward makes them ready.
  absl::StatusOr<double> ForwardBackward(int micro);
  // Waits for the all-reduce, applies what the fused path has not yet.
  absl::Status Update();
  // The state from the freshest source, and the snapshots of the steps to come.
  absl::Status Resume();
  absl::Status StartSnapshots();
  // Where the run is after the step that ended at `epoch_rows` of `epoch`
  // (the next epoch's start when it ended the epoch): a checkpoint's frame.
  TrainingState PositionAfterStep(int64_t epoch, bool epoch_done, int64_t epoch_rows) const;
  // The state after the step into the worker's segment, when Begin took it.
  absl::Status SnapshotIfTaken(int64_t epoch, bool epoch_done, int64_t epoch_rows);
  absl::Status CheckpointIfDue(bool stop, int64_t epoch, bool epoch_done, int64_t epoch_rows);
  void ReportIfDue(int64_t epoch, Clock::time_point epoch_start, int64_t epoch_samples);
  void Flight(TrainPhase phase) {
    if (context_.flight) context_.flight->Phase(phase);
  }
  // Sends the progress with these figures and starts the next report's.
  void Report(int64_t epoch, double loss, double samples_per_second, int64_t seen);
  absl::Status EndEpoch(int64_t epoch, Clock::time_point epoch_start, int64_t epoch_samples);

  const v1::TrainerSpec& spec_;
  const Dataset& train_;
  const Dataset& test_;
  const TrainerContext& context_;
  Collective* const comm_;
  const int rank_, world_;
  const uint64_t seed_;
  const int batch_, accum_;
  DistributedSampler sampler_;
  const std::function<Clock::time_point()> now_;  // of checkpoint_every_s, for tests
  const std::chrono::seconds checkpoint_every_;

  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Reducer> reducer_;
  std::unique_ptr<Snapshotter> snapshotter_;  // null: no snapshots in memory
  std::unique_ptr<CheckpointWriter> writer_;  // rank 0's, with a checkpoint_dir
  LrSchedule schedule_;
  // Without clipping, each bucket is applied as soon as it is reduced;
  // clipping needs the global norm, so then the step waits for all.
  bool fused_ = true;
  int64_t rows_per_step_ = 0;
  TrainingState position_;
  TrainResult result_;
  std::vector<float> xb_;
  std::vector<int32_t> yb_;
  v1::Progress progress_;
  int64_t step_ = 0;
  int64_t samples_ = 0;  // of the epochs done
  double train_seconds_ = 0;
  double loss_sum_ = 0;  // since the last report
  int loss_count_ = 0;
  Clock::time_point step_start_;
  // The first step is reported at once: after a restart, the step it
  // resumed at shows without waiting out an interval.
  Clock::time_point last_report_{};
  Clock::time_point last_checkpoint_;
  bool stopped_ = false;
};

absl::Status TrainingRun::Start() {
  const RunnerFactory make_runner = context_.make_runner ? context_.make_runner : MakeCpuRunner;
  ASSIGN_OR_RETURN(runner_, make_runner(spec_, Widths(spec_, train_)));
  const int64_t steps_per_epoch = StepsFrom(0);
  if (steps_per_epoch == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size ", batch_, " x grad_accum_steps ", accum_, " x ", world_,
                     " ranks is more than the ", train_.rows, " training rows"));
  }
  rows_per_step_ = static_cast<int64_t>(batch_) * accum_ * world_;
  RETURN_IF_ERROR(Resume());
  RETURN_IF_ERROR(StartSnapshots());
  if (rank_ == 0 && !context_.checkpoint_dir.empty()) {
    writer_ = std::make_unique<CheckpointWriter>(context_.checkpoint_dir, /*keep=*/3);
  }
  if (context_.steps_done) context_.steps_done->store(position_.step, std::memory_order_relaxed);
  if (context_.flight) context_.flight->Step(position_.step + 1);
  // The last step: those done, the rest of this epoch and whole epochs
  // after it, at this world size (a resize changes the steps still to go,
  // not the data still to see).
  const int64_t total_steps = position_.epoch >= spec_.epochs()
                                  ? position_.step
                                  : position_.step + StepsFrom(position_.epoch_rows) +
                                        (spec_.epochs() - position_.epoch - 1) * steps_per_epoch;
  result_.total_steps = total_steps;
  schedule_ = LrSchedule{spec_.optimizer().lr(), spec_.lr_scaling(), world_, spec_.warmup_steps(),
                         total_steps};
  if (rank_ == 0 && context_.log) {
    context_.log(
        absl::StrFormat("learning rate %g: optimizer.lr %g scaled by lr_scaling %s at "
                        "world size %d",
                        schedule_.Peak(), schedule_.base_lr, schedule_.scaling, world_));
  }
  RETURN_IF_ERROR(MakeReducer());
  xb_.resize(static_cast<size_t>(batch_) * train_.features);
  yb_.resize(batch_);
  progress_.set_total_steps(total_steps);
  progress_.set_world_size(world_);
  progress_.set_backend(comm_->backend());
  progress_.set_group_generation(context_.group_generation);
  step_start_ = Clock::now();
  step_ = position_.step;
  last_checkpoint_ = now_();
  return absl::OkStatus();
}

absl::Status TrainingRun::Resume() {
  ResumeSources sources;
  sources.comm = comm_;
  sources.checkpoint_dir = context_.checkpoint_dir;
  sources.snapshots = context_.snapshots;
  sources.fetched_step = context_.snapshot_fetched_step;
  sources.log = context_.log;
  ASSIGN_OR_RETURN(Resumed resumed, ResumeState(sources, seed_, *runner_));
  for (const std::string& skipped : resumed.skipped) {
    if (context_.warn) context_.warn(absl::StrCat("snapshot skipped: ", skipped));
  }
  position_ = resumed.position;
  result_.resumed_from_step = resumed.step;
  result_.resumed_from = resumed.from;
  progress_.set_resumed_from(resumed.from);
  progress_.set_resumed_step(std::max<int64_t>(0, resumed.step));
  return absl::OkStatus();
}

absl::Status TrainingRun::StartSnapshots() {
  const int every = spec_.has_snapshot_every_steps() ? spec_.snapshot_every_steps() : 1;
  if (every <= 0) return absl::OkStatus();
  if (context_.snapshots == nullptr) {
    progress_.set_snapshots_off(context_.snapshots_refused.empty()
                                    ? "its worker holds no snapshot segment for it"
                                    : context_.snapshots_refused);
  } else {
    SnapshotterOptions options;
    options.every_steps = every;
    options.copy = context_.snapshot_copy;
    options.attempt = context_.attempt;
    options.rank = context_.snapshot_rank >= 0 ? context_.snapshot_rank : rank_;
    options.world_size = world_;
    absl::StatusOr<std::unique_ptr<Snapshotter>> made = Snapshotter::Make(
        context_.snapshots, runner_->size(), runner_->optimizer_state_size(), options);
    if (made.ok()) {
      snapshotter_ = *std::move(made);
      return absl::OkStatus();
    }
    progress_.set_snapshots_off(std::string(made.status().message()));
  }
  if (context_.warn) {
    context_.warn(absl::StrCat("no snapshots in memory: ", progress_.snapshots_off(),
                               "; restarts resume from the checkpoints on disk"));
  }
  return absl::OkStatus();
}

absl::Status TrainingRun::MakeReducer() {
  // Ranks on one host reduce their gradients where they lie.
  if (float* shared = comm_->SharedBuffer(runner_->size()); shared != nullptr) {
    if (!runner_->UseGradientBuffer(shared)) {
      return absl::InternalError("the collective offers shared gradients the runner cannot use");
    }
  }
  ReducerOptions options;
  options.bucket_bytes = static_cast<size_t>(std::max(0.01, spec_.bucket_mb()) * (1 << 20));
  options.first_bucket_bytes = std::min<size_t>(1 << 20, options.bucket_bytes);
  options.bf16_compression = spec_.grad_compression() == "bf16";
  options.thread_setup = [this] { return runner_->EnterThread(); };
  options.flight = context_.flight;
  options.before_reduce = [this](const Bucket& b) { return runner_->BeforeReduce(b); };
  if (options.bf16_compression) options.reduce_bf16 = runner_->Bf16Reduce(comm_);
  reducer_ = std::make_unique<Reducer>(comm_, runner_->param_spans(), runner_->grads(), options,
                                       context_.events);
  fused_ = spec_.grad_clip_norm() <= 0;
  return absl::OkStatus();
}

absl::StatusOr<bool> TrainingRun::Epoch(int64_t epoch) {
  const int64_t start = epoch == position_.epoch ? position_.epoch_rows : 0;
  const std::vector<int64_t> indices = sampler_.Indices(epoch, start);
  const int64_t batches = StepsFrom(start) * accum_;
  const Clock::time_point epoch_start = Clock::now();
  int64_t epoch_samples = 0;
  for (int64_t b = 0; b < batches; ++b) {
    Flight(TrainPhase::kData);
    LoadBatch(indices, b);
    const int micro = static_cast<int>(b % accum_);
    ASSIGN_OR_RETURN(const double loss, ForwardBackward(micro));
    loss_sum_ += loss;
    ++loss_count_;
    epoch_samples += batch_;
    if (micro != accum_ - 1) continue;
    RETURN_IF_ERROR(Update());
    result_.train_loss = loss;
    const bool stop = rank_ == 0 && context_.stop_requested && context_.stop_requested();
    const bool epoch_done = b + 1 == batches;
    const int64_t rows = start + (b + 1) / accum_ * rows_per_step_;
    RETURN_IF_ERROR(SnapshotIfTaken(epoch, epoch_done, rows));
    RETURN_IF_ERROR(CheckpointIfDue(stop, epoch, epoch_done, rows));
    ReportIfDue(epoch, epoch_start, epoch_samples);
    if (stop || step_ == context_.stop_after_step) {
      if (stop && context_.log) context_.log(absl::StrCat("stopped after step ", step_));
      stopped_ = stop;
      return false;
    }
  }
  RETURN_IF_ERROR(EndEpoch(epoch, epoch_start, epoch_samples));
  return true;
}

void TrainingRun::LoadBatch(const std::vector<int64_t>& indices, int64_t b) {
  for (int i = 0; i < batch_; ++i) {
    const int64_t row = indices[b * batch_ + i];
    std::memcpy(xb_.data() + static_cast<size_t>(i) * train_.features, train_.row(row),
                train_.features * sizeof(float));
    yb_[i] = train_.y[row];
  }
}

absl::StatusOr<double> TrainingRun::ForwardBackward(int micro) {
  const bool communicate = micro == accum_ - 1;
  if (communicate) {
    // Before the reducer's thread may copy the step's first bucket.
    const bool copy = snapshotter_ != nullptr && snapshotter_->Begin(step_ + 1) &&
                      snapshotter_->copying_buckets();
    if (fused_) {
      reducer_->Prepare(static_cast<float>(world_), [this, copy](const Bucket& b) {
        return copy ? snapshotter_->Update(*runner_, b.offset, b.size)
                    : runner_->UpdateRange(b.offset, b.size);
      });
      // Before backward marks the first bucket ready.
      runner_->BeginStep(static_cast<float>(schedule_.At(step_)), reducer_->grad_scale());
    } else {
      reducer_->Prepare(static_cast<float>(world_));
    }
  }
  // Only the last micro-step communicates (DDP's no_sync for the rest).
  Flight(TrainPhase::kForward);
  std::function<void(int)> mark_ready;
  if (communicate) {
    mark_ready = [this, backward = false](int param) mutable {
      if (!backward) Flight(TrainPhase::kBackward);  // the first gradient is final
      backward = true;
      reducer_->MarkReady(param);
    };
  }
  ASSIGN_OR_RETURN(const double loss,
                   runner_->ForwardBackward(xb_.data(), yb_.data(), batch_, 1.0f / accum_,
                                            micro > 0, mark_ready));
  if (context_.events) context_.events->Record("backward end");
  return loss;
}

absl::Status TrainingRun::Update() {
  Flight(TrainPhase::kAllReduce);
  const Clock::time_point wait_start = Clock::now();
  RETURN_IF_ERROR(reducer_->Finish());
  const double waited = Seconds(wait_start);
  Flight(TrainPhase::kOptimizer);
  if (!fused_) {
    double grad_scale = reducer_->grad_scale();
    ASSIGN_OR_RETURN(const double norm, runner_->GradNorm());
    grad_scale *= ClipFactor(grad_scale * norm, spec_.grad_clip_norm());
    runner_->BeginStep(static_cast<float>(schedule_.At(step_)), static_cast<float>(grad_scale));
    RETURN_IF_ERROR(runner_->UpdateRange(0, runner_->size()));
  }
  RETURN_IF_ERROR(runner_->AfterStep());
  ++step_;
  if (progress_.first_step_unix_ms() == 0) {
    progress_.set_first_step_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::system_clock::now().time_since_epoch())
                                         .count());
  }
  if (context_.flight) context_.flight->Step(step_ + 1);  // the step it is on now
  if (context_.steps_done) context_.steps_done->store(step_, std::memory_order_relaxed);
  if (context_.on_progress) {
    // Kept only until the next report clears them; without reports, not kept.
    const Clock::time_point now = Clock::now();
    const double step_seconds = std::chrono::duration<double>(now - step_start_).count();
    progress_.add_step_seconds(step_seconds);
    // Computing is the step but for its wait for the collectives (which a
    // slow peer lengthens): the figure that shows a straggler.
    progress_.set_compute_seconds(progress_.compute_seconds() +
                                  std::max(0.0, step_seconds - waited));
    progress_.set_compute_steps(progress_.compute_steps() + 1);
    step_start_ = now;
  }
  return absl::OkStatus();
}

TrainingState TrainingRun::PositionAfterStep(int64_t epoch, bool epoch_done,
                                             int64_t epoch_rows) const {
  TrainingState position;
  position.step = step_;
  position.epoch = epoch_done ? epoch + 1 : epoch;
  position.epoch_rows = epoch_done ? 0 : epoch_rows;
  position.world_size = world_;
  position.seed = seed_;
  position.optimizer_steps = runner_->optimizer_steps();
  return position;
}

absl::Status TrainingRun::SnapshotIfTaken(int64_t epoch, bool epoch_done, int64_t epoch_rows) {
  if (snapshotter_ == nullptr) return absl::OkStatus();
  return snapshotter_->End(*runner_, PositionAfterStep(epoch, epoch_done, epoch_rows));
}

absl::Status TrainingRun::CheckpointIfDue(bool stop, int64_t epoch, bool epoch_done,
                                          int64_t epoch_rows) {
  if (writer_ == nullptr) return absl::OkStatus();
  const bool steps_due =
      spec_.checkpoint_every_steps() > 0 && step_ % spec_.checkpoint_every_steps() == 0;
  const bool time_due =
      spec_.checkpoint_every_s() > 0 && now_() - last_checkpoint_ >= checkpoint_every_;
  if (!(stop || steps_due || time_due)) return absl::OkStatus();
  Flight(TrainPhase::kCheckpoint);
  // The write before, if the disk has not kept up with the interval.
  RETURN_IF_ERROR(writer_->Flush());
  RETURN_IF_ERROR(writer_->Stage(*runner_, PositionAfterStep(epoch, epoch_done, epoch_rows)));
  last_checkpoint_ = now_();
  // A stopping rank exits once its checkpoint is whole.
  return stop ? writer_->Flush() : absl::OkStatus();
}

void TrainingRun::ReportIfDue(int64_t epoch, Clock::time_point epoch_start, int64_t epoch_samples) {
  if (!context_.on_progress || std::chrono::duration<double>(Clock::now() - last_report_).count() <
                                   context_.progress_interval_seconds) {
    return;
  }
  const double elapsed = train_seconds_ + Seconds(epoch_start);
  Report(epoch, loss_sum_ / std::max(1, loss_count_),
         elapsed > 0 ? (samples_ + epoch_samples) / elapsed : 0, samples_ + epoch_samples);
  loss_sum_ = 0;
  loss_count_ = 0;
}

void TrainingRun::Report(int64_t epoch, double loss, double samples_per_second, int64_t seen) {
  progress_.set_step(step_);
  progress_.set_epoch(static_cast<int>(epoch));
  progress_.set_loss(loss);
  progress_.set_samples_per_second(samples_per_second);
  progress_.set_allreduce_bytes(reducer_->bytes_total());
  progress_.set_allreduce_seconds(reducer_->seconds_total());
  progress_.set_samples(seen);
  double stall = 0;
  if (snapshotter_ != nullptr) {
    const SnapshotStats snapshots = snapshotter_->stats();
    progress_.set_snapshot_step(std::max<int64_t>(0, snapshots.newest_step));
    stall += snapshots.stall_seconds;
  }
  if (writer_ != nullptr) {
    const CheckpointWriterStats checkpoints = writer_->stats();
    stall += checkpoints.stage_seconds + checkpoints.wait_seconds;
  }
  progress_.set_checkpoint_stall_seconds(stall);
  context_.on_progress(progress_);
  progress_.clear_step_seconds();
  last_report_ = Clock::now();
}

absl::Status TrainingRun::EndEpoch(int64_t epoch, Clock::time_point epoch_start,
                                   int64_t epoch_samples) {
  train_seconds_ += Seconds(epoch_start);
  samples_ += epoch_samples;
  result_.samples_per_second = train_seconds_ > 0 ? samples_ / train_seconds_ : 0;
  if (rank_ == 0) {
    Flight(TrainPhase::kEvaluate);
    ASSIGN_OR_RETURN(auto evaluation, runner_->Evaluate(test_));
    const auto [accuracy, eval_loss] = evaluation;
    result_.eval_accuracy = accuracy;
    result_.eval_loss = eval_loss;
    progress_.set_eval_accuracy(accuracy);
    progress_.set_eval_loss(eval_loss);
    if (context_.log) {
      context_.log(absl::StrFormat(
          "epoch %d/%d  step %d  train loss %.4f  test accuracy %.4f  test loss %.4f  "
          "%.0f samples/s/rank",
          epoch + 1, spec_.epochs(), step_, result_.train_loss, accuracy, eval_loss,
          result_.samples_per_second));
    }
  }
  if (context_.on_progress) {
    Report(epoch + 1, result_.train_loss, result_.samples_per_second, samples_);
  }
  step_start_ = Clock::now();  // evaluation is not a step
  return absl::OkStatus();
}

absl::Status TrainingRun::Drain() {
  if (writer_ != nullptr) {
    RETURN_IF_ERROR(writer_->Flush());
    result_.checkpoints = writer_->stats();
  }
  if (snapshotter_ != nullptr) {
    snapshotter_->Drain();
    result_.snapshots = snapshotter_->stats();
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainResult> TrainingRun::Stopped() {
  RETURN_IF_ERROR(Drain());
  RETURN_IF_ERROR(runner_->ReadState(&result_.params, &position_.optimizer_state));
  result_.steps = step_;
  result_.stopped = stopped_;
  return std::move(result_);
}

absl::StatusOr<TrainResult> TrainingRun::Finish() {
  Flight(TrainPhase::kDone);
  RETURN_IF_ERROR(Drain());
  RETURN_IF_ERROR(comm_->Barrier());
  RETURN_IF_ERROR(runner_->ReadState(&result_.params, &position_.optimizer_state));
  result_.steps = step_;
  result_.allreduce_bytes = reducer_->bytes_total();
  result_.allreduce_seconds = reducer_->seconds_total();
  return std::move(result_);
}

}  // namespace

absl::StatusOr<TrainResult> Train(const v1::TrainerSpec& spec, const TrainTestSplit& data,
                                  const TrainerContext& context) {
  TrainingRun run(spec, data, context);
  RETURN_IF_ERROR(run.Start());
  for (int64_t epoch = run.first_epoch(); epoch < spec.epochs(); ++epoch) {
    ASSIGN_OR_RETURN(const bool whole, run.Epoch(epoch));
    if (!whole) return run.Stopped();
  }
  return run.Finish();
}

}  // namespace ringmaster
