#include "trainer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "trainer/checkpoint.h"
#include "trainer/loss.h"
#include "trainer/mlp.h"
#include "trainer/optimizer.h"
#include "trainer/reducer.h"
#include "trainer/sampler.h"

namespace ringmaster {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kEvalChunk = 1024;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

std::pair<double, double> EvaluateModel(Mlp& model, const Dataset& data) {
  if (data.rows == 0) return {0, 0};
  double loss = 0;
  int64_t correct = 0;
  for (int64_t start = 0; start < data.rows; start += kEvalChunk) {
    const int rows = static_cast<int>(std::min<int64_t>(kEvalChunk, data.rows - start));
    const float* logits = model.Forward(data.row(start), rows);
    LossResult r = SoftmaxCrossEntropy(logits, data.y.data() + start, rows, data.classes,
                                       nullptr);
    loss += r.loss * rows;
    correct += r.correct;
  }
  return {static_cast<double>(correct) / data.rows, loss / data.rows};
}

std::vector<int> Widths(const v1::TrainerSpec& spec, const Dataset& data) {
  std::vector<int> widths = {data.features};
  for (int h : spec.model().hidden()) widths.push_back(h);
  widths.push_back(data.classes);
  return widths;
}

// Rank 0 reads the newest valid checkpoint and every rank receives its
// state (or rank 0's initial weights) by broadcast, so ranks need not share
// a file system.
absl::StatusOr<int64_t> ResumeOrBroadcast(const TrainerContext& context, uint64_t seed,
                                          Mlp& model, Optimizer& optimizer,
                                          TrainingState* position) {
  Collective* comm = context.comm;
  int64_t header[5] = {0, 0, 0, 0, -1};  // step, epoch, next_batch, optimizer steps, found
  if (comm->rank() == 0 && !context.checkpoint_dir.empty()) {
    absl::StatusOr<LoadedCheckpoint> loaded = LoadLatestCheckpoint(context.checkpoint_dir);
    if (loaded.ok()) {
      for (const std::string& skipped : loaded->skipped) {
        if (context.log) context.log(absl::StrCat("checkpoint skipped: ", skipped));
      }
      TrainingState& s = loaded->state;
      if (s.params.size() != model.params().size() ||
          s.optimizer_state.size() != optimizer.mutable_state()->size()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "checkpoint ", loaded->path, " does not fit this model (", s.params.size(),
            " parameters, the model has ", model.params().size(), ")"));
      }
      if (s.seed != seed && context.log) {
        context.log(absl::StrCat("checkpoint was written with seed ", s.seed, ", not ", seed));
      }
      model.params() = std::move(s.params);
      *optimizer.mutable_state() = std::move(s.optimizer_state);
      header[0] = s.step;
      header[1] = s.epoch;
      header[2] = s.next_batch;
      header[3] = s.optimizer_steps;
      header[4] = 1;
      if (context.log) context.log(absl::StrCat("resuming from ", loaded->path));
    } else if (context.log && loaded.status().message().find("skipped") != std::string::npos) {
      context.log(std::string(loaded.status().message()));
    }
  }
  RETURN_IF_ERROR(comm->Broadcast(header, sizeof(header), 0));
  RETURN_IF_ERROR(comm->Broadcast(model.params().data(), model.params().size() * sizeof(float), 0));
  if (header[4] == 1) {
    std::vector<float>& state = *optimizer.mutable_state();
    RETURN_IF_ERROR(comm->Broadcast(state.data(), state.size() * sizeof(float), 0));
    optimizer.set_steps(header[3]);
  }
  position->step = header[0];
  position->epoch = header[1];
  position->next_batch = header[2];
  return header[4] == 1 ? header[0] : -1;
}

}  // namespace

std::pair<double, double> Evaluate(const std::vector<int>& widths,
                                   const std::vector<float>& params, const Dataset& data) {
  Mlp model(widths, 0);
  model.params() = params;
  return EvaluateModel(model, data);
}

absl::StatusOr<TrainResult> Train(const v1::TrainerSpec& spec, const TrainTestSplit& data,
                                  const TrainerContext& context) {
  Collective* comm = context.comm;
  const int rank = comm->rank(), world = comm->size();
  const Dataset& train = data.train;
  const uint64_t seed = static_cast<uint64_t>(spec.seed());
  Mlp model(Widths(spec, train), seed);
  const size_t n = model.params().size();
  std::unique_ptr<Optimizer> optimizer = MakeOptimizer(spec.optimizer(), n);

  const int batch = std::max(1, spec.batch_size());
  const int accum = std::max(1, spec.grad_accum_steps());
  DistributedSampler sampler(train.rows, rank, world, seed);
  const int64_t steps_per_epoch = sampler.rows_per_rank() / batch / accum;
  if (steps_per_epoch == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_size ", batch, " x grad_accum_steps ", accum, " x ", world,
        " ranks is more than the ", train.rows, " training rows"));
  }
  const int64_t batches_per_epoch = steps_per_epoch * accum;
  LrSchedule schedule{spec.optimizer().lr(), spec.lr_scaling(), world,
                      spec.warmup_steps(), spec.epochs() * steps_per_epoch};

  TrainResult result;
  TrainingState position;
  ASSIGN_OR_RETURN(result.resumed_from_step,
                   ResumeOrBroadcast(context, seed, model, *optimizer, &position));

  ReducerOptions reducer_options;
  reducer_options.bucket_bytes = static_cast<size_t>(std::max(0.01, spec.bucket_mb()) * (1 << 20));
  reducer_options.first_bucket_bytes = std::min<size_t>(1 << 20, reducer_options.bucket_bytes);
  reducer_options.bf16_compression = spec.grad_compression() == "bf16";
  Reducer reducer(comm, model.param_spans(), model.grads().data(), reducer_options,
                  context.events);
  auto mark_ready = [&reducer](int param) { reducer.MarkReady(param); };

  std::vector<float> xb(static_cast<size_t>(batch) * train.features);
  std::vector<int32_t> yb(batch);
  std::vector<float> dlogits(static_cast<size_t>(batch) * train.classes);
  v1::Progress progress;
  progress.set_total_steps(schedule.total_steps);
  int64_t step = position.step;
  int64_t samples = 0;
  double train_seconds = 0;
  double loss_sum = 0;
  int loss_count = 0;
  Clock::time_point last_report = Clock::now();

  for (int64_t epoch = position.epoch; epoch < spec.epochs(); ++epoch) {
    const std::vector<int64_t> indices = sampler.Indices(epoch);
    const int64_t first = epoch == position.epoch ? position.next_batch : 0;
    const Clock::time_point epoch_start = Clock::now();
    int64_t epoch_samples = 0;
    for (int64_t b = first; b < batches_per_epoch; ++b) {
      for (int i = 0; i < batch; ++i) {
        const int64_t row = indices[b * batch + i];
        std::memcpy(xb.data() + static_cast<size_t>(i) * train.features, train.row(row),
                    train.features * sizeof(float));
        yb[i] = train.y[row];
      }
      const int micro = static_cast<int>(b % accum);
      const bool communicate = micro == accum - 1;
      const float* logits = model.Forward(xb.data(), batch);
      LossResult loss = SoftmaxCrossEntropy(logits, yb.data(), batch, train.classes,
                                            dlogits.data(), 1.0f / accum);
      loss_sum += loss.loss;
      ++loss_count;
      // Without clipping, each bucket is applied as soon as it is reduced;
      // clipping needs the global norm, so then the step waits for all.
      const bool fused = spec.grad_clip_norm() <= 0;
      if (communicate) {
        if (fused) {
          reducer.Prepare(static_cast<float>(world), [&](const Bucket& bucket) {
            optimizer->Update(bucket.offset, bucket.size, model.params().data(),
                              model.grads().data());
          });
          // Before backward marks the first bucket ready.
          optimizer->BeginStep(static_cast<float>(schedule.At(step)), reducer.grad_scale());
        } else {
          reducer.Prepare(static_cast<float>(world));
        }
      }
      // Only the last micro-step communicates (DDP's no_sync for the rest).
      model.Backward(dlogits.data(), micro > 0,
                     communicate ? std::function<void(int)>(mark_ready) : nullptr);
      if (context.events) context.events->Record("backward end");
      epoch_samples += batch;
      if (!communicate) continue;
      RETURN_IF_ERROR(reducer.Finish());
      if (!fused) {
        double grad_scale = reducer.grad_scale();
        const double norm = grad_scale * GradNorm(model.grads().data(), n);
        grad_scale *= ClipFactor(norm, spec.grad_clip_norm());
        optimizer->Step(model.params().data(), model.grads().data(), n,
                        static_cast<float>(schedule.At(step)), static_cast<float>(grad_scale));
      }
      ++step;
      result.train_loss = loss.loss;

      const bool epoch_done = b + 1 == batches_per_epoch;
      if (rank == 0 && spec.checkpoint_every_steps() > 0 &&
          step % spec.checkpoint_every_steps() == 0 && !context.checkpoint_dir.empty()) {
        TrainingState state;
        state.step = step;
        state.epoch = epoch_done ? epoch + 1 : epoch;
        state.next_batch = epoch_done ? 0 : b + 1;
        state.seed = seed;
        state.optimizer_steps = optimizer->steps();
        state.params = model.params();
        state.optimizer_state = *optimizer->mutable_state();
        RETURN_IF_ERROR(WriteCheckpoint(context.checkpoint_dir, state));
      }
      const double elapsed = train_seconds + Seconds(epoch_start);
      if (context.on_progress &&
          std::chrono::duration<double>(Clock::now() - last_report).count() >=
              context.progress_interval_seconds) {
        progress.set_step(step);
        progress.set_epoch(static_cast<int>(epoch));
        progress.set_loss(loss_sum / std::max(1, loss_count));
        progress.set_samples_per_second(elapsed > 0 ? (samples + epoch_samples) / elapsed : 0);
        progress.set_allreduce_bytes(reducer.bytes_total());
        progress.set_allreduce_seconds(reducer.seconds_total());
        context.on_progress(progress);
        loss_sum = 0;
        loss_count = 0;
        last_report = Clock::now();
      }
      if (step == context.stop_after_step) {
        result.params = model.params();
        result.steps = step;
        return result;
      }
    }
    train_seconds += Seconds(epoch_start);
    samples += epoch_samples;
    result.samples_per_second = train_seconds > 0 ? samples / train_seconds : 0;
    if (rank == 0) {
      auto [accuracy, eval_loss] = EvaluateModel(model, data.test);
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
      progress.set_step(step);
      progress.set_epoch(static_cast<int>(epoch + 1));
      progress.set_loss(result.train_loss);
      progress.set_samples_per_second(result.samples_per_second);
      progress.set_allreduce_bytes(reducer.bytes_total());
      progress.set_allreduce_seconds(reducer.seconds_total());
      context.on_progress(progress);
      last_report = Clock::now();
    }
  }
  RETURN_IF_ERROR(comm->Barrier());
  result.params = model.params();
  result.steps = step;
  result.allreduce_bytes = reducer.bytes_total();
  result.allreduce_seconds = reducer.seconds_total();
  return result;
}

}  // namespace ringmaster
