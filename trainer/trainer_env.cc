#include "trainer/trainer_env.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ringmaster {
namespace {

class Reader {
 public:
  explicit Reader(const GetEnv& getenv) : getenv_(getenv) {}

  void String(const char* name, std::string* out) {
    if (const char* v = getenv_(name); v != nullptr && *v != '\0') *out = v;
  }
  void Int(const char* name, int* out, int min) {
    const char* v = getenv_(name);
    if (v == nullptr || *v == '\0') return;
    if (!absl::SimpleAtoi(v, out) || *out < min) Bad(name, v, absl::StrCat("an integer >= ", min));
  }
  void Bool(const char* name, bool* out) {
    const char* v = getenv_(name);
    if (v == nullptr || *v == '\0') return;
    if (std::string(v) == "1" || std::string(v) == "true") {
      *out = true;
    } else if (std::string(v) == "0" || std::string(v) == "false") {
      *out = false;
    } else {
      Bad(name, v, "1 or 0");
    }
  }
  void Seconds(const char* name, absl::Duration* out) {
    const char* v = getenv_(name);
    if (v == nullptr || *v == '\0') return;
    double seconds;
    if (!absl::SimpleAtod(v, &seconds) || !(seconds > 0) || seconds > 1e7) {
      Bad(name, v, "a number of seconds > 0");
      return;
    }
    *out = absl::Seconds(seconds);
  }
  void Bad(const char* name, const char* value, const std::string& expected) {
    if (status_.ok()) {
      status_ =
          absl::InvalidArgumentError(absl::StrCat(name, "=\"", value, "\" is not ", expected));
    }
  }
  const absl::Status& status() const { return status_; }

 private:
  const GetEnv& getenv_;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<TrainerEnv> ReadTrainerEnv(const GetEnv& getenv) {
  TrainerEnv env;
  Reader read(getenv);
  read.Int("RANK", &env.rank, 0);
  read.Int("WORLD_SIZE", &env.world_size, 1);
  read.Int("TORCHELASTIC_RESTART_COUNT", &env.attempt, 0);
  read.Int("GROUP_RANK", &env.group_rank, 0);
  read.Int("LOCAL_RANK", &env.local_rank, 0);
  read.String("RINGMASTER_JOB_ID", &env.job_id);
  read.String("RINGMASTER_TRAINER_SPEC", &env.spec_json);
  read.String("RINGMASTER_HOST", &env.host);
  read.String("RINGMASTER_WORKER_ADDRESS", &env.worker_address);
  read.String("RINGMASTER_WORKER_ID", &env.worker_id);
  read.String("RINGMASTER_TLS_CA", &env.tls_ca);
  read.String("RINGMASTER_JOB_TOKEN", &env.token);
  read.String("RINGMASTER_CHECKPOINT_DIR", &env.checkpoint_dir);
  read.String("RINGMASTER_TRAINER_SAVE_WEIGHTS", &env.save_weights);
  read.String("CUDA_VISIBLE_DEVICES", &env.visible_gpus);
  read.Bool("RINGMASTER_PREFLIGHT", &env.preflight);
  read.Seconds("RINGMASTER_COLLECTIVE_TIMEOUT_S", &env.collective_timeout);
  read.Seconds("RINGMASTER_STOP_GRACE_S", &env.stop_grace);
  read.Int("RINGMASTER_SNAPSHOT_FD", &env.snapshot_fd, -1);
  read.String("RINGMASTER_SNAPSHOT_REFUSED", &env.snapshot_refused);
  read.Int("RINGMASTER_GROUP_GENERATION", &env.group_generation, 0);
  int regroup_seconds = 0;
  read.Int("RINGMASTER_REGROUP_TIMEOUT_S", &regroup_seconds, 0);
  env.regroup_timeout = absl::Seconds(regroup_seconds);
  if (!read.status().ok()) return read.status();
  std::string fetched;
  read.String("RINGMASTER_SNAPSHOT_FETCHED", &fetched);
  if (!fetched.empty() &&
      !absl::SimpleAtoi(fetched.substr(0, fetched.find(' ')), &env.snapshot_fetched_step)) {
    return absl::InvalidArgumentError(
        absl::StrCat("RINGMASTER_SNAPSHOT_FETCHED=", fetched, ": not \"<step> <from where>\""));
  }
  if (env.rank >= env.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("RANK=", env.rank, " is not below WORLD_SIZE=", env.world_size));
  }
  return env;
}

}  // namespace ringmaster
