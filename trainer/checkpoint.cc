#include "trainer/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'R', 'M', 'C', 'K', 'P', 'T', '0', '2'};
constexpr char kFile[] = "state.bin";

class Reader {
 public:
  explicit Reader(const std::string& data) : data_(data) {}
  template <typename T>
  bool Value(T* v) {
    if (pos_ + sizeof(T) > data_.size()) return false;
    std::memcpy(v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool Floats(std::vector<float>* v) {
    uint64_t n;
    if (!Value(&n) || n > (data_.size() - pos_) / sizeof(float)) return false;
    v->resize(n);
    if (n > 0) std::memcpy(v->data(), data_.data() + pos_, n * sizeof(float));  // not null
    pos_ += n * sizeof(float);
    return true;
  }
  size_t pos() const { return pos_; }

 private:
  const std::string& data_;
  size_t pos_ = 0;
};

absl::Status FsyncPath(const std::string& path, int flags) {
  int fd = open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return ErrnoError(absl::StrCat("open ", path));
  int rc = fsync(fd);
  close(fd);
  return rc == 0 ? absl::OkStatus() : ErrnoError(absl::StrCat("fsync ", path));
}

absl::Status WriteFileSynced(const std::string& path, const std::string& data) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(absl::StrCat("create ", path));
  size_t written = 0;
  while (written < data.size()) {
    ssize_t n = write(fd, data.data() + written, data.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status s = ErrnoError(absl::StrCat("write ", path));
      close(fd);
      return s;
    }
    written += n;
  }
  if (fsync(fd) != 0) {
    absl::Status s = ErrnoError(absl::StrCat("fsync ", path));
    close(fd);
    return s;
  }
  return close(fd) == 0 ? absl::OkStatus() : ErrnoError(absl::StrCat("close ", path));
}

// step-<N> directories under `dir`, newest first.
std::vector<std::pair<int64_t, fs::path>> ListCheckpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    std::string name = entry.path().filename().string();
    absl::string_view rest = name;
    int64_t step;
    if (entry.is_directory() && absl::ConsumePrefix(&rest, "step-") &&
        absl::SimpleAtoi(rest, &step)) {
      found.push_back({step, entry.path()});
    }
  }
  std::sort(found.begin(), found.end(), [](auto& a, auto& b) { return a.first > b.first; });
  return found;
}

}  // namespace

CheckpointLayout LayoutOf(size_t params, size_t state) {
  CheckpointLayout layout;
  layout.params_offset = sizeof(kMagic) + 6 * sizeof(int64_t) + sizeof(uint64_t);
  layout.state_offset = layout.params_offset + params * sizeof(float) + sizeof(uint64_t);
  layout.checksum_offset = layout.state_offset + state * sizeof(float);
  layout.bytes = layout.checksum_offset + sizeof(uint32_t);
  return layout;
}

void WriteCheckpointFrame(const TrainingState& position, size_t params, size_t state, char* out) {
  const CheckpointLayout layout = LayoutOf(params, state);
  const int64_t fields[6] = {position.step,
                             position.epoch,
                             position.epoch_rows,
                             position.world_size,
                             static_cast<int64_t>(position.seed),
                             position.optimizer_steps};
  std::memcpy(out, kMagic, sizeof(kMagic));
  std::memcpy(out + sizeof(kMagic), fields, sizeof(fields));
  const uint64_t counts[2] = {params, state};
  std::memcpy(out + layout.params_offset - sizeof(uint64_t), &counts[0], sizeof(uint64_t));
  std::memcpy(out + layout.state_offset - sizeof(uint64_t), &counts[1], sizeof(uint64_t));
}

uint32_t SealCheckpoint(char* out, const CheckpointLayout& layout) {
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(out), static_cast<uInt>(layout.checksum_offset)));
  std::memcpy(out + layout.checksum_offset, &crc, sizeof(crc));
  return crc;
}

std::string EncodeCheckpoint(const TrainingState& state) {
  const CheckpointLayout layout = LayoutOf(state.params.size(), state.optimizer_state.size());
  std::string data(layout.bytes, '\0');
  WriteCheckpointFrame(state, state.params.size(), state.optimizer_state.size(), data.data());
  if (!state.params.empty()) {
    std::memcpy(data.data() + layout.params_offset, state.params.data(),
                state.params.size() * sizeof(float));
  }
  if (!state.optimizer_state.empty()) {
    std::memcpy(data.data() + layout.state_offset, state.optimizer_state.data(),
                state.optimizer_state.size() * sizeof(float));
  }
  SealCheckpoint(data.data(), layout);
  return data;
}

absl::Status WriteCheckpoint(const std::string& dir, const TrainingState& state, int keep) {
  return WriteCheckpointFile(dir, state.step, EncodeCheckpoint(state), keep);
}

absl::Status WriteCheckpointFile(const std::string& dir, int64_t step, const std::string& data,
                                 int keep) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return absl::InternalError(absl::StrCat("create ", dir, ": ", error.message()));
  const std::string final_dir = absl::StrCat(dir, "/step-", step);
  const std::string temp_dir = absl::StrCat(dir, "/.step-", step, ".tmp-", getpid());
  fs::remove_all(temp_dir, error);
  fs::create_directory(temp_dir, error);
  if (error) return absl::InternalError(absl::StrCat("create ", temp_dir, ": ", error.message()));
  RETURN_IF_ERROR(WriteFileSynced(absl::StrCat(temp_dir, "/", kFile), data));
  RETURN_IF_ERROR(FsyncPath(temp_dir, O_RDONLY | O_DIRECTORY));
  fs::remove_all(final_dir, error);
  fs::rename(temp_dir, final_dir, error);
  if (error) {
    return absl::InternalError(absl::StrCat("rename ", temp_dir, ": ", error.message()));
  }
  RETURN_IF_ERROR(FsyncPath(dir, O_RDONLY | O_DIRECTORY));
  auto all = ListCheckpoints(dir);
  for (size_t i = std::max(keep, 1); i < all.size(); ++i) fs::remove_all(all[i].second, error);
  return absl::OkStatus();
}

absl::StatusOr<TrainingState> ReadCheckpointFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  return DecodeCheckpoint(std::string((std::istreambuf_iterator<char>(in)), {}), path);
}

absl::StatusOr<TrainingState> DecodeCheckpoint(std::string data, const std::string& path,
                                               bool verify_checksum) {
  if (data.size() < sizeof(kMagic) + sizeof(uint32_t) ||
      std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError(absl::StrCat(path,
                                            ": not a checkpoint of this trainer version (format ",
                                            absl::string_view(kMagic + 6, 2), ") or truncated"));
  }
  uint32_t stored;
  std::memcpy(&stored, data.data() + data.size() - sizeof(stored), sizeof(stored));
  if (verify_checksum &&
      stored != static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(data.data()),
                                            static_cast<uInt>(data.size() - 4)))) {
    return absl::DataLossError(absl::StrCat(path, ": checksum mismatch (truncated or corrupt)"));
  }
  data.resize(data.size() - sizeof(stored));
  Reader reader(data);
  TrainingState state;
  char magic[sizeof(kMagic)];
  if (!reader.Value(&magic) || !reader.Value(&state.step) || !reader.Value(&state.epoch) ||
      !reader.Value(&state.epoch_rows) || !reader.Value(&state.world_size) ||
      !reader.Value(&state.seed) || !reader.Value(&state.optimizer_steps) ||
      !reader.Floats(&state.params) || !reader.Floats(&state.optimizer_state) ||
      reader.pos() != data.size()) {
    return absl::DataLossError(absl::StrCat(path, ": malformed contents"));
  }
  return state;
}

int64_t NewestCheckpointStep(const std::string& dir) {
  const auto all = ListCheckpoints(dir);
  return all.empty() ? -1 : all.front().first;
}

absl::StatusOr<LoadedCheckpoint> LoadLatestCheckpoint(const std::string& dir) {
  LoadedCheckpoint loaded;
  for (const auto& [step, path] : ListCheckpoints(dir)) {
    const std::string file = (path / kFile).string();
    absl::StatusOr<TrainingState> state = ReadCheckpointFile(file);
    if (state.ok()) {
      loaded.state = *std::move(state);
      loaded.path = path.string();
      return loaded;
    }
    loaded.skipped.push_back(std::string(state.status().message()));
  }
  std::string why = absl::StrCat("no readable checkpoint in ", dir);
  for (const std::string& skipped : loaded.skipped) absl::StrAppend(&why, "; skipped ", skipped);
  return absl::NotFoundError(why);
}

}  // namespace ringmaster
