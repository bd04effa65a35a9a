#include "trainer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "trainer/checkpoint.h"
#include "trainer/optimizer.h"
#include "trainer/reducer.h"
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

// Rank 0 reads the newest valid checkpoint and every rank receives its
// state (or rank 0's initial weights) by broadcast, so ranks need not share
// a file system. The checkpoint may come from a world of another size: its
// position is counted in rows of the epoch, which any world can resume.
absl::StatusOr<int64_t> ResumeOrBroadcast(const TrainerContext& context, uint64_t seed,
                                          ModelRunner& runner, TrainingState* position) {
  Collective* comm = context.comm;
  int64_t header[5] = {0, 0, 0, 0, -1};  // step, epoch, epoch_rows, optimizer steps, found
  if (comm->rank() == 0 && !context.checkpoint_dir.empty()) {
    absl::StatusOr<LoadedCheckpoint> loaded = LoadLatestCheckpoint(context.checkpoint_dir);
    if (loaded.ok()) {
      for (const std::string& skipped : loaded->skipped) {
        if (context.log) context.log(absl::StrCat("checkpoint skipped: ", skipped));
      }
      TrainingState& s = loaded->state;
      if (s.params.size() != runner.size() ||
          s.optimizer_state.size() != runner.optimizer_state_size()) {
        return absl::FailedPreconditionError(
            absl::StrCat("checkpoint ", loaded->path, " does not fit this model (", s.params.size(),
                         " parameters, the model has ", runner.size(), ")"));
      }
      if (s.seed != seed && context.log) {
        context.log(absl::StrCat("checkpoint was written with seed ", s.seed, ", not ", seed));
      }
      RETURN_IF_ERROR(runner.WriteState(s.params, &s.optimizer_state));
      header[0] = s.step;
      header[1] = s.epoch;
      header[2] = s.epoch_rows;
      header[3] = s.optimizer_steps;
      header[4] = 1;
      if (context.log) {
        context.log(absl::StrCat("resuming from ", loaded->path,
                                 s.world_size != comm->size()
                                     ? absl::StrCat(" (written by ", s.world_size,
                                                    " ranks, resumed by ", comm->size(), ")")
                                     : ""));
      }
    } else if (context.log && loaded.status().message().find("skipped") != std::string::npos) {
      context.log(std::string(loaded.status().message()));
    }
  }
  RETURN_IF_ERROR(comm->Broadcast(header, sizeof(header), 0));
  RETURN_IF_ERROR(comm->Broadcast(runner.params(), runner.size() * sizeof(float), 0));
  if (header[4] == 1) {
    RETURN_IF_ERROR(comm->Broadcast(runner.optimizer_state(),
                                    runner.optimizer_state_size() * sizeof(float), 0));
    runner.set_optimizer_steps(header[3]);
  }
  position->step = header[0];
  position->epoch = header[1];
  position->epoch_rows = header[2];
  return header[4] == 1 ? header[0] : -1;
}

absl::Status SaveCheckpoint(const TrainerContext& context, ModelRunner& runner, uint64_t seed,
                            int64_t step, int64_t epoch, int64_t epoch_rows) {
  TrainingState state;
  state.step = step;
  state.epoch = epoch;
  state.epoch_rows = epoch_rows;
  state.world_size = context.comm->size();
  state.seed = seed;
  state.optimizer_steps = runner.optimizer_steps();
  RETURN_IF_ERROR(runner.ReadState(&state.params, &state.optimizer_state));
  return WriteCheckpoint(context.checkpoint_dir, state);
}

}  // namespace

absl::StatusOr<TrainResult> Train(const v1::TrainerSpec& spec, const TrainTestSplit& data,
                                  const TrainerContext& context) {
  Collective* comm = context.comm;
  const int rank = comm->rank(), world = comm->size();
  const Dataset& train = data.train;
  const uint64_t seed = static_cast<uint64_t>(spec.seed());
  const RunnerFactory make_runner = context.make_runner ? context.make_runner : MakeCpuRunner;
  ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner, make_runner(spec, Widths(spec, train)));

  const int batch = std::max(1, spec.batch_size());
  const int accum = std::max(1, spec.grad_accum_steps());
  DistributedSampler sampler(train.rows, rank, world, seed);
  // Steps of an epoch from its row `start` on, at this world size.
  auto steps_from = [&](int64_t start) { return sampler.rows_per_rank(start) / batch / accum; };
  const int64_t steps_per_epoch = steps_from(0);
  if (steps_per_epoch == 0) {
    return absl::InvalidArgumentError(absl::StrCat("batch_size ", batch, " x grad_accum_steps ",
                                                   accum, " x ", world, " ranks is more than the ",
                                                   train.rows, " training rows"));
  }
  const int64_t rows_per_step = static_cast<int64_t>(batch) * accum * world;

  TrainResult result;
  TrainingState position;
  ASSIGN_OR_RETURN(result.resumed_from_step, ResumeOrBroadcast(context, seed, *runner, &position));
  if (context.steps_done) context.steps_done->store(position.step, std::memory_order_relaxed);
  // The last step: those done, the rest of this epoch and whole epochs
  // after it, at this world size (a resize changes the steps still to go,
  // not the data still to see).
  const int64_t total_steps = position.epoch >= spec.epochs()
                                  ? position.step
                                  : position.step + steps_from(position.epoch_rows) +
                                        (spec.epochs() - position.epoch - 1) * steps_per_epoch;
  result.total_steps = total_steps;
  LrSchedule schedule{spec.optimizer().lr(), spec.lr_scaling(), world, spec.warmup_steps(),
                      total_steps};
  if (rank == 0 && context.log) {
    context.log(
        absl::StrFormat("learning rate %g: optimizer.lr %g scaled by lr_scaling %s at "
                        "world size %d",
                        schedule.Peak(), schedule.base_lr, schedule.scaling, world));
  }

  // Ranks on one host reduce their gradients where they lie.
  if (float* shared = comm->SharedBuffer(runner->size()); shared != nullptr) {
    if (!runner->UseGradientBuffer(shared)) {
      return absl::InternalError("the collective offers shared gradients the runner cannot use");
    }
  }
  ReducerOptions reducer_options;
  reducer_options.bucket_bytes = static_cast<size_t>(std::max(0.01, spec.bucket_mb()) * (1 << 20));
  reducer_options.first_bucket_bytes = std::min<size_t>(1 << 20, reducer_options.bucket_bytes);
  reducer_options.bf16_compression = spec.grad_compression() == "bf16";
  reducer_options.thread_setup = [&runner] { return runner->EnterThread(); };
  reducer_options.before_reduce = [&runner](const Bucket& b) { return runner->BeforeReduce(b); };
  if (reducer_options.bf16_compression) reducer_options.reduce_bf16 = runner->Bf16Reduce(comm);
  Reducer reducer(comm, runner->param_spans(), runner->grads(), reducer_options, context.events);
  auto mark_ready = [&reducer](int param) { reducer.MarkReady(param); };
  auto apply_bucket = [&runner](const Bucket& b) { return runner->UpdateRange(b.offset, b.size); };
  // Without clipping, each bucket is applied as soon as it is reduced;
  // clipping needs the global norm, so then the step waits for all.
  const bool fused = spec.grad_clip_norm() <= 0;

  std::vector<float> xb(static_cast<size_t>(batch) * train.features);
  std::vector<int32_t> yb(batch);
  v1::Progress progress;
  progress.set_total_steps(total_steps);
  progress.set_world_size(world);
  progress.set_backend(comm->backend());
  Clock::time_point step_start = Clock::now();
  int64_t step = position.step;
  int64_t samples = 0;
  double train_seconds = 0;
  double loss_sum = 0;
  int loss_count = 0;
  // The first step is reported at once: after a restart, the step it
  // resumed at shows without waiting out an interval.
  Clock::time_point last_report{};
  // Time-based checkpoints read this clock, so that tests can drive it.
  const std::function<Clock::time_point()> now =
      context.now ? context.now : [] { return Clock::now(); };
  const auto checkpoint_every = std::chrono::seconds(spec.checkpoint_every_s());
  Clock::time_point last_checkpoint = now();
  // Sends the progress with these figures and starts the next report's.
  auto report = [&](int64_t epoch, double loss, double samples_per_second, int64_t seen) {
    progress.set_step(step);
    progress.set_epoch(static_cast<int>(epoch));
    progress.set_loss(loss);
    progress.set_samples_per_second(samples_per_second);
    progress.set_allreduce_bytes(reducer.bytes_total());
    progress.set_allreduce_seconds(reducer.seconds_total());
    progress.set_samples(seen);
    context.on_progress(progress);
    progress.clear_step_seconds();
    last_report = Clock::now();
  };

  for (int64_t epoch = position.epoch; epoch < spec.epochs(); ++epoch) {
    const int64_t start = epoch == position.epoch ? position.epoch_rows : 0;
    const std::vector<int64_t> indices = sampler.Indices(epoch, start);
    const int64_t batches = steps_from(start) * accum;
    const Clock::time_point epoch_start = Clock::now();
    int64_t epoch_samples = 0;
    for (int64_t b = 0; b < batches; ++b) {
      for (int i = 0; i < batch; ++i) {
        const int64_t row = indices[b * batch + i];
        std::memcpy(xb.data() + static_cast<size_t>(i) * train.features, train.row(row),
                    train.features * sizeof(float));
        yb[i] = train.y[row];
      }
      const int micro = static_cast<int>(b % accum);
      const bool communicate = micro == accum - 1;
      if (communicate) {
        if (fused) {
          reducer.Prepare(static_cast<float>(world), apply_bucket);
          // Before backward marks the first bucket ready.
          runner->BeginStep(static_cast<float>(schedule.At(step)), reducer.grad_scale());
        } else {
          reducer.Prepare(static_cast<float>(world));
        }
      }
      // Only the last micro-step communicates (DDP's no_sync for the rest).
      ASSIGN_OR_RETURN(
          const double loss,
          runner->ForwardBackward(xb.data(), yb.data(), batch, 1.0f / accum, micro > 0,
                                  communicate ? std::function<void(int)>(mark_ready) : nullptr));
      if (context.events) context.events->Record("backward end");
      loss_sum += loss;
      ++loss_count;
      epoch_samples += batch;
      if (!communicate) continue;
      RETURN_IF_ERROR(reducer.Finish());
      if (!fused) {
        double grad_scale = reducer.grad_scale();
        ASSIGN_OR_RETURN(const double norm, runner->GradNorm());
        grad_scale *= ClipFactor(grad_scale * norm, spec.grad_clip_norm());
        runner->BeginStep(static_cast<float>(schedule.At(step)), static_cast<float>(grad_scale));
        RETURN_IF_ERROR(runner->UpdateRange(0, runner->size()));
      }
      RETURN_IF_ERROR(runner->AfterStep());
      ++step;
      if (context.steps_done) context.steps_done->store(step, std::memory_order_relaxed);
      if (context.on_progress) {
        // Kept only until the next report clears them; without reports, not kept.
        const Clock::time_point now = Clock::now();
        progress.add_step_seconds(std::chrono::duration<double>(now - step_start).count());
        step_start = now;
      }
      result.train_loss = loss;

      const bool epoch_done = b + 1 == batches;
      const bool stop = rank == 0 && context.stop_requested && context.stop_requested();
      const bool steps_due =
          spec.checkpoint_every_steps() > 0 && step % spec.checkpoint_every_steps() == 0;
      const bool time_due =
          spec.checkpoint_every_s() > 0 && now() - last_checkpoint >= checkpoint_every;
      if (rank == 0 && !context.checkpoint_dir.empty() && (stop || steps_due || time_due)) {
        RETURN_IF_ERROR(SaveCheckpoint(context, *runner, seed, step, epoch_done ? epoch + 1 : epoch,
                                       epoch_done ? 0 : start + (b + 1) / accum * rows_per_step));
        last_checkpoint = now();
      }
      const double elapsed = train_seconds + Seconds(epoch_start);
      if (context.on_progress &&
          std::chrono::duration<double>(Clock::now() - last_report).count() >=
              context.progress_interval_seconds) {
        report(epoch, loss_sum / std::max(1, loss_count),
               elapsed > 0 ? (samples + epoch_samples) / elapsed : 0, samples + epoch_samples);
        loss_sum = 0;
        loss_count = 0;
      }
      if (stop || step == context.stop_after_step) {
        if (stop && context.log) context.log(absl::StrCat("stopped after step ", step));
        RETURN_IF_ERROR(runner->ReadState(&result.params, &position.optimizer_state));
        result.steps = step;
        result.stopped = stop;
        return result;
      }
    }
    train_seconds += Seconds(epoch_start);
    samples += epoch_samples;
    result.samples_per_second = train_seconds > 0 ? samples / train_seconds : 0;
    if (rank == 0) {
      ASSIGN_OR_RETURN(auto evaluation, runner->Evaluate(data.test));
      const auto [accuracy, eval_loss] = evaluation;
      result.eval_accuracy = accuracy;
      result.eval_loss = eval_loss;
      progress.set_eval_accuracy(accuracy);
      progress.set_eval_loss(eval_loss);
      if (context.log) {
        context.log(absl::StrFormat(
            "epoch %d/%d  step %d  train loss %.4f  test accuracy %.4f  test loss %.4f  "
            "%.0f samples/s/rank",
            epoch + 1, spec.epochs(), step, result.train_loss, accuracy, eval_loss,
            result.samples_per_second));
      }
    }
    if (context.on_progress) {
      report(epoch + 1, result.train_loss, result.samples_per_second, samples);
    }
    step_start = Clock::now();  // evaluation is not a step
  }
  RETURN_IF_ERROR(comm->Barrier());
  RETURN_IF_ERROR(runner->ReadState(&result.params, &position.optimizer_state));
  result.steps = step;
  result.allreduce_bytes = reducer.bytes_total();
  result.allreduce_seconds = reducer.seconds_total();
  return result;
}

}  // namespace ringmaster
