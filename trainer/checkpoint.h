// Training checkpoints: <dir>/step-<N>/state.bin, written by rank 0 to a
// temporary directory, fsynced, then renamed into place, so a reader sees
// a whole checkpoint or none. Each file ends with a CRC-32 of its contents.
#ifndef RINGMASTER_TRAINER_CHECKPOINT_H_
#define RINGMASTER_TRAINER_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster {

struct TrainingState {
  int64_t step = 0;             // optimizer steps done
  int64_t epoch = 0;            // the epoch to continue in
  int64_t epoch_rows = 0;       // rows of that epoch's permutation the world consumed
  int64_t world_size = 0;       // ranks that wrote it (a resume may have other counts)
  uint64_t seed = 0;            // all randomness derives from it (init, shuffles)
  int64_t optimizer_steps = 0;  // the optimizer's own count (AdamW bias correction)
  std::vector<float> params;
  std::vector<float> optimizer_state;
};

// Writes the checkpoint of `state.step` under `dir` and keeps the newest
// `keep` checkpoints.
absl::Status WriteCheckpoint(const std::string& dir, const TrainingState& state, int keep = 3);
// The same for a file's bytes already encoded (EncodeCheckpoint, or
// written in place and sealed).
absl::Status WriteCheckpointFile(const std::string& dir, int64_t step, const std::string& data,
                                 int keep = 3);

struct LoadedCheckpoint {
  TrainingState state;
  std::string path;
  std::vector<std::string> skipped;  // unreadable newer checkpoints, with why
};

// The newest checkpoint under `dir` that reads back whole with a matching
// checksum; NOT_FOUND when there is none. A truncated or corrupt newer one
// is listed in `skipped` and passed over.
absl::StatusOr<LoadedCheckpoint> LoadLatestCheckpoint(const std::string& dir);

// The step of the newest checkpoint directory under `dir`, by its name
// (not read); -1 when there is none.
int64_t NewestCheckpointStep(const std::string& dir);

// One checkpoint file; DATA_LOSS naming what is wrong.
absl::StatusOr<TrainingState> ReadCheckpointFile(const std::string& path);

// Where the parts of a checkpoint file of `params` and `state` floats lie,
// for writing one in place (trainer/snapshotter.h): a frame, the
// parameters, the optimizer state, and last a CRC-32 of all before it.
struct CheckpointLayout {
  size_t params_offset = 0;
  size_t state_offset = 0;
  size_t checksum_offset = 0;
  size_t bytes = 0;  // the whole file
};
CheckpointLayout LayoutOf(size_t params, size_t state);
// Writes the frame into `out` (layout.bytes long): the format's magic,
// `position`'s fields (its vectors are not read) and the two counts.
void WriteCheckpointFrame(const TrainingState& position, size_t params, size_t state, char* out);
// Once the floats are in place too: writes the checksum and returns it.
uint32_t SealCheckpoint(char* out, const CheckpointLayout& layout);

// A checkpoint file's bytes, and back (`path` only names it in errors).
std::string EncodeCheckpoint(const TrainingState& state);
// `verify_checksum` false: the bytes were checked otherwise (a snapshot's
// slot), and the file's own checksum is not computed.
absl::StatusOr<TrainingState> DecodeCheckpoint(std::string data, const std::string& path,
                                               bool verify_checksum = true);

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_CHECKPOINT_H_
