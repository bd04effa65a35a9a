#include "trainer/resume.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "trainer/snapshotter.h"

namespace ringmaster {
namespace {

enum Source : int64_t { kFresh = 0, kMemory = 1, kDisk = 2 };

// Steps travel as two floats each below 2^24, so that a sum over ranks in
// which one rank adds each is exact.
constexpr int kLowBits = 22;
void PutStep(int64_t step, float* out) {
  const int64_t shifted = step + 1;  // 0: none
  out[0] = static_cast<float>(shifted >> kLowBits);
  out[1] = static_cast<float>(shifted & ((int64_t{1} << kLowBits) - 1));
}
int64_t GetStep(const float* in) {
  return (static_cast<int64_t>(in[0]) << kLowBits) + static_cast<int64_t>(in[1]) - 1;
}

absl::Status Fits(const TrainingState& s, const ModelRunner& runner, const std::string& what) {
  if (s.params.size() == runner.size() &&
      s.optimizer_state.size() == runner.optimizer_state_size()) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(what, " does not fit this model (",
                                                    s.params.size(), " parameters, the model has ",
                                                    runner.size(), ")"));
}

// This rank's newest snapshot that reads back whole and fits the model.
std::optional<TrainingState> OwnSnapshot(const ResumeSources& sources, const ModelRunner& runner,
                                         std::vector<std::string>* skipped) {
  if (sources.snapshots == nullptr) return std::nullopt;
  absl::StatusOr<LoadedCheckpoint> loaded = LoadNewestSnapshot(*sources.snapshots);
  if (!loaded.ok()) {
    if (absl::StrContains(loaded.status().message(), "skipped")) {
      skipped->push_back(std::string(loaded.status().message()));
    }
    return std::nullopt;
  }
  for (const std::string& why : loaded->skipped) skipped->push_back(why);
  if (absl::Status fits = Fits(loaded->state, runner, "the snapshot in memory"); !fits.ok()) {
    skipped->push_back(std::string(fits.message()));
    return std::nullopt;
  }
  return std::move(loaded->state);
}

// Which step each rank holds in memory, as every rank learns it.
struct MemorySteps {
  int64_t best = -1;  // the highest any rank holds; -1: none
  int holder = -1;    // the lowest rank holding it
  bool all_hold = false;
  // Ranks whose snapshot of `best` their worker fetched from a peer.
  std::vector<int> fetched;
};
absl::StatusOr<MemorySteps> ExchangeSteps(Collective* comm,
                                          const std::optional<TrainingState>& mine,
                                          int64_t fetched_step) {
  // Per rank: its step as two floats, and 1 when its worker fetched it.
  const int world = comm->size();
  std::vector<float> held(3 * world, 0.0f);
  float* own = &held[3 * comm->rank()];
  if (mine) {
    PutStep(mine->step, own);
    own[2] = mine->step == fetched_step ? 1.0f : 0.0f;
  }
  RETURN_IF_ERROR(comm->AllReduceSum(held.data(), held.size()));
  MemorySteps steps;
  for (int r = 0; r < world; ++r) {
    if (GetStep(&held[3 * r]) > steps.best) {
      steps.best = GetStep(&held[3 * r]);
      steps.holder = r;
    }
  }
  steps.all_hold = steps.best >= 0;
  for (int r = 0; r < world; ++r) {
    const bool holds = GetStep(&held[3 * r]) == steps.best;
    steps.all_hold = steps.all_hold && holds;
    if (holds && held[3 * r + 2] > 0) steps.fetched.push_back(r);
  }
  return steps;
}

// "every rank's own snapshot (rank 1's fetched from a peer's replica)".
std::string MemorySource(const MemorySteps& held, int root) {
  std::string text = held.all_hold ? std::string("every rank's own snapshot")
                                   : absl::StrCat("rank ", root, "'s snapshot, sent to the others");
  // Only the snapshots that were used.
  std::vector<int> used;
  for (int r : held.fetched) {
    if (held.all_hold || r == root) used.push_back(r);
  }
  if (used.empty()) return text;
  absl::StrAppend(&text, " (rank", used.size() > 1 ? "s " : " ", absl::StrJoin(used, ", "),
                  used.size() > 1 ? "'" : "'s", " fetched from a peer's replica)");
  return text;
}

// Rank 0's newest checkpoint on disk when it is newer than `best`, said in
// its log; nullopt otherwise.
absl::StatusOr<std::optional<TrainingState>> NewerOnDisk(
    const ResumeSources& sources, uint64_t seed, const ModelRunner& runner, int64_t best,
    const std::function<void(const std::string&)>& log) {
  if (sources.checkpoint_dir.empty() || NewestCheckpointStep(sources.checkpoint_dir) <= best) {
    return std::nullopt;
  }
  absl::StatusOr<LoadedCheckpoint> loaded = LoadLatestCheckpoint(sources.checkpoint_dir);
  if (!loaded.ok()) {
    if (absl::StrContains(loaded.status().message(), "skipped")) {
      log(std::string(loaded.status().message()));
    }
    return std::nullopt;
  }
  for (const std::string& skipped : loaded->skipped) log("checkpoint skipped: " + skipped);
  if (loaded->state.step <= best) return std::nullopt;
  RETURN_IF_ERROR(Fits(loaded->state, runner, absl::StrCat("checkpoint ", loaded->path)));
  if (loaded->state.seed != seed) {
    log(absl::StrCat("checkpoint was written with seed ", loaded->state.seed, ", not ", seed));
  }
  const int64_t writers = loaded->state.world_size;
  const int world = sources.comm->size();
  log(absl::StrCat("resuming from ", loaded->path,
                   writers != world
                       ? absl::StrCat(" (written by ", writers, " ranks, resumed by ", world, ")")
                       : ""));
  return std::move(loaded->state);
}

}  // namespace

absl::StatusOr<Resumed> ResumeState(const ResumeSources& sources, uint64_t seed,
                                    ModelRunner& runner) {
  Collective* comm = sources.comm;
  const int rank = comm->rank();
  auto log = [&](const std::string& line) {
    if (sources.log) sources.log(line);
  };
  Resumed resumed;
  std::optional<TrainingState> mine = OwnSnapshot(sources, runner, &resumed.skipped);
  ASSIGN_OR_RETURN(const MemorySteps held, ExchangeSteps(comm, mine, sources.fetched_step));

  // Rank 0 weighs its newest checkpoint on disk against that.
  std::optional<TrainingState> disk;
  int64_t decision[2] = {held.best >= 0 ? kMemory : kFresh, held.best >= 0 ? held.holder : 0};
  if (rank == 0) {
    ASSIGN_OR_RETURN(disk, NewerOnDisk(sources, seed, runner, held.best, log));
    if (disk) {
      decision[0] = kDisk;
      decision[1] = 0;
    }
  }
  RETURN_IF_ERROR(comm->Broadcast(decision, sizeof(decision), 0));
  const Source source = static_cast<Source>(decision[0]);
  const int root = static_cast<int>(decision[1]);
  const bool from_replica =
      source == kMemory && std::any_of(held.fetched.begin(), held.fetched.end(),
                                       [&](int r) { return held.all_hold || r == root; });
  if (source == kMemory) {
    log(absl::StrCat("resuming at step ", held.best, " from memory: ", MemorySource(held, root)));
  }

  // The state, where it is: each rank's own when all hold the step, else
  // the root's, sent to every rank.
  const TrainingState* state = source == kDisk ? (rank == 0 ? &*disk : nullptr)
                               : source == kMemory && (held.all_hold || rank == root) ? &*mine
                                                                                      : nullptr;
  if (state != nullptr) {
    RETURN_IF_ERROR(runner.WriteState(state->params, &state->optimizer_state));
    runner.set_optimizer_steps(state->optimizer_steps);
  }
  int64_t header[4] = {-1, 0, 0, 0};  // step, epoch, epoch_rows, optimizer steps
  if (state != nullptr) {
    header[0] = state->step;
    header[1] = state->epoch;
    header[2] = state->epoch_rows;
    header[3] = state->optimizer_steps;
  }
  if (!(source == kMemory && held.all_hold)) {
    RETURN_IF_ERROR(comm->Broadcast(header, sizeof(header), root));
    RETURN_IF_ERROR(comm->Broadcast(runner.params(), runner.size() * sizeof(float), root));
    if (source != kFresh) {
      RETURN_IF_ERROR(comm->Broadcast(runner.optimizer_state(),
                                      runner.optimizer_state_size() * sizeof(float), root));
      runner.set_optimizer_steps(header[3]);
    }
  }
  if (source == kFresh) return resumed;
  resumed.from = source == kDisk ? "disk" : from_replica ? "replica" : "memory";
  resumed.step = header[0];
  resumed.source_rank = root;
  resumed.position.step = header[0];
  resumed.position.epoch = header[1];
  resumed.position.epoch_rows = header[2];
  return resumed;
}

}  // namespace ringmaster
