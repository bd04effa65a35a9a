#include "domain/spec_validation.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/job_id.h"
#include "common/labels.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "domain/image_reference.h"

namespace ringmaster {
namespace {

constexpr int kMaxRanks = 4096;
constexpr int kMaxNameLength = 53;  // leaves room for "-<number>" in job ids
constexpr int kMaxTimeoutSeconds = 30 * 24 * 3600;

absl::Status Bad(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("invalid job spec: ", field, ": ", why));
}

// A DNS-1123 label: job ids, checkpoint directories and metric labels are
// built from it. A valid job id that leaves room for "-<number>".
bool IsValidName(const std::string& name) {
  return name.size() <= kMaxNameLength && !name.empty() && name.back() != '-' &&
         ValidateJobId(name).ok();
}

bool IsValidEnvName(const std::string& name) {
  if (name.empty() || absl::ascii_isdigit(name[0])) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

absl::Status CheckOneOf(const std::string& field, const std::string& value,
                        const std::set<std::string>& allowed) {
  if (value.empty() || allowed.count(value)) return absl::OkStatus();
  return Bad(field, absl::StrCat("must be one of ", absl::StrJoin(allowed, ", "), ", got \"", value,
                                 "\""));
}

// Every floating-point field of `message` (at any depth) is finite: a NaN
// passes every `< 0` check and trains to a loss of nan.
absl::Status CheckFinite(const google::protobuf::Message& message, const std::string& prefix) {
  const google::protobuf::Reflection* reflection = message.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const google::protobuf::FieldDescriptor* field : fields) {
    const std::string name = absl::StrCat(prefix, ".", field->name());
    using Type = google::protobuf::FieldDescriptor::CppType;
    if (field->cpp_type() == Type::CPPTYPE_MESSAGE && !field->is_repeated()) {
      RETURN_IF_ERROR(CheckFinite(reflection->GetMessage(message, field), name));
      continue;
    }
    if (field->cpp_type() != Type::CPPTYPE_DOUBLE && field->cpp_type() != Type::CPPTYPE_FLOAT) {
      continue;
    }
    const int count = field->is_repeated() ? reflection->FieldSize(message, field) : 1;
    for (int i = 0; i < count; ++i) {
      const bool is_double = field->cpp_type() == Type::CPPTYPE_DOUBLE;
      const double value = field->is_repeated()
                               ? (is_double ? reflection->GetRepeatedDouble(message, field, i)
                                            : reflection->GetRepeatedFloat(message, field, i))
                               : (is_double ? reflection->GetDouble(message, field)
                                            : reflection->GetFloat(message, field));
      if (!std::isfinite(value)) {
        return Bad(field->is_repeated() ? absl::StrCat(name, "[", i, "]") : name,
                   absl::StrCat("must be a finite number, got ", value));
      }
    }
  }
  return absl::OkStatus();
}

// Unset fields are 0 and take their defaults (ApplyJobSpecDefaults), so
// 0 is allowed wherever a default exists.
absl::Status ValidateModelAndData(const v1::TrainerSpec& t) {
  if (!t.model().type().empty() && t.model().type() != "mlp") {
    return Bad("trainer.model.type", absl::StrCat("must be mlp, got \"", t.model().type(), "\""));
  }
  for (int i = 0; i < t.model().hidden_size(); ++i) {
    if (t.model().hidden(i) <= 0) {
      return Bad(absl::StrCat("trainer.model.hidden[", i, "]"),
                 absl::StrCat("must be > 0, got ", t.model().hidden(i)));
    }
  }
  if (t.data().path().empty()) {
    return Bad("trainer.data.path", "is required (a CSV file, digits, or synthetic:rows=N,...)");
  }
  RETURN_IF_ERROR(CheckOneOf("trainer.data.format", t.data().format(), {"csv"}));
  if (t.data().test_fraction() < 0 || t.data().test_fraction() >= 1) {
    return Bad("trainer.data.test_fraction", "must be in [0, 1)");
  }
  return absl::OkStatus();
}

absl::Status ValidateOptimizer(const v1::TrainerSpec& t) {
  const v1::TrainerSpec::Optimizer& opt = t.optimizer();
  RETURN_IF_ERROR(CheckOneOf("trainer.optimizer.type", opt.type(), {"sgd", "adamw"}));
  if (opt.lr() < 0) {
    return Bad("trainer.optimizer.lr",
               absl::StrCat("must be > 0, or 0 for its default, got ", opt.lr()));
  }
  if (opt.weight_decay() < 0) return Bad("trainer.optimizer.weight_decay", "must be >= 0");
  if (opt.momentum() < 0 || opt.momentum() >= 1) {
    return Bad("trainer.optimizer.momentum", "must be in [0, 1)");
  }
  RETURN_IF_ERROR(CheckOneOf("trainer.lr_scaling", t.lr_scaling(), {"linear", "sqrt", "none"}));
  if (t.warmup_steps() < 0) return Bad("trainer.warmup_steps", "must be >= 0");
  if (t.grad_clip_norm() < 0) return Bad("trainer.grad_clip_norm", "must be >= 0");
  return absl::OkStatus();
}

absl::Status ValidateSteps(const v1::TrainerSpec& t, int gpus_per_rank) {
  if (t.epochs() < 0) return Bad("trainer.epochs", "must be >= 1, or 0 for its default");
  if (t.batch_size() < 0) return Bad("trainer.batch_size", "must be >= 1, or 0 for its default");
  if (t.grad_accum_steps() < 0) {
    return Bad("trainer.grad_accum_steps", "must be >= 1, or 0 for its default");
  }
  if (t.bucket_mb() < 0) return Bad("trainer.bucket_mb", "must be > 0, or 0 for its default");
  RETURN_IF_ERROR(CheckOneOf("trainer.precision", t.precision(), {"fp32", "bf16"}));
  if (t.precision() == "bf16" && gpus_per_rank == 0) {
    return Bad("trainer.precision", "bf16 needs gpus_per_rank >= 1");
  }
  RETURN_IF_ERROR(CheckOneOf("trainer.grad_compression", t.grad_compression(), {"none", "bf16"}));
  if (t.checkpoint_every_steps() < 0) return Bad("trainer.checkpoint_every_steps", "must be >= 0");
  if (t.checkpoint_every_s() < 0) return Bad("trainer.checkpoint_every_s", "must be >= 0");
  if (t.snapshot_every_steps() < 0) return Bad("trainer.snapshot_every_steps", "must be >= 0");
  return absl::OkStatus();
}

absl::Status ValidateTrainer(const v1::TrainerSpec& t, int gpus_per_rank) {
  RETURN_IF_ERROR(CheckFinite(t, "trainer"));
  if (gpus_per_rank > 1) {
    return Bad(
        "gpus_per_rank",
        absl::StrCat("is ", gpus_per_rank,
                     " but the built-in trainer drives one GPU per rank; run "
                     "gpus_per_rank: 1 with ",
                     gpus_per_rank, "x the ranks (a command job may take several GPUs per rank)"));
  }
  RETURN_IF_ERROR(ValidateModelAndData(t));
  RETURN_IF_ERROR(ValidateOptimizer(t));
  return ValidateSteps(t, gpus_per_rank);
}

absl::Status ValidateResources(const v1::JobSpec& spec) {
  const v1::Resources& resources = spec.resources();
  if (resources.memory_mb() < 0) {
    return Bad("resources.memory_mb", absl::StrCat("must be >= 0, got ", resources.memory_mb()));
  }
  if (resources.cpus() < 0) {
    return Bad("resources.cpus", absl::StrCat("must be >= 0, got ", resources.cpus()));
  }
  if (resources.gpus() != 0 && spec.gpus_per_rank() != 0 &&
      resources.gpus() != spec.gpus_per_rank()) {
    return Bad("resources.gpus", absl::StrCat("is ", resources.gpus(), " but gpus_per_rank is ",
                                              spec.gpus_per_rank(), "; set one of them"));
  }
  if (resources.gpus() < 0 || resources.gpus() > 16) {
    return Bad("resources.gpus", absl::StrCat("must be in [0, 16], got ", resources.gpus()));
  }
  return absl::OkStatus();
}

constexpr int kMaxLabels = 64;
constexpr int kMaxNeverRetryCodes = 32;

absl::Status ValidateLabels(const char* field,
                            const google::protobuf::Map<std::string, std::string>& labels) {
  if (labels.size() > kMaxLabels) {
    return Bad(field, absl::StrCat("has ", labels.size(), " entries; at most ", kMaxLabels));
  }
  for (const auto& [key, value] : labels) {
    if (absl::Status s = ValidateLabel(key, value); !s.ok()) {
      return Bad(field, std::string(s.message()));
    }
  }
  return absl::OkStatus();
}

// Where the ranks go, how long the job may take, and when it restarts.
absl::Status ValidatePlacementAndPolicy(const v1::JobSpec& spec) {
  RETURN_IF_ERROR(ValidateLabels("labels", spec.labels()));
  RETURN_IF_ERROR(ValidateLabels("worker_selector", spec.worker_selector()));
  const int per_worker = spec.ranks_per_worker();
  if (per_worker < 0 || per_worker > spec.ranks()) {
    return Bad("ranks_per_worker",
               absl::StrCat("must be in [0, ranks=", spec.ranks(), "], got ", per_worker));
  }
  if (per_worker > 0 && spec.ranks() % per_worker != 0) {
    return Bad("ranks_per_worker",
               absl::StrCat("must divide ranks=", spec.ranks(), ", got ", per_worker));
  }
  if (per_worker > 0 && spec.min_ranks() % per_worker != 0) {
    return Bad("min_ranks", absl::StrCat("must be a multiple of ranks_per_worker=", per_worker,
                                         ", got ", spec.min_ranks()));
  }
  if (spec.deadline_s() < 0 || spec.deadline_s() > kMaxTimeoutSeconds) {
    return Bad("deadline_s", absl::StrCat("must be in [0, ", kMaxTimeoutSeconds,
                                          "] seconds (0: none), got ", spec.deadline_s()));
  }
  if (spec.spare_ok() && spec.has_preemptible() && !spec.preemptible()) {
    return Bad("spare_ok", "needs a preemptible job: a job that needs a spare stops it");
  }
  RETURN_IF_ERROR(CheckOneOf("restart_policy", spec.restart_policy(), {"on_failure", "never"}));
  RETURN_IF_ERROR(CheckOneOf("on_straggler", spec.on_straggler(), {"warn", "exclude"}));
  if (spec.never_retry_exit_codes_size() > kMaxNeverRetryCodes) {
    return Bad("never_retry_exit_codes", absl::StrCat("has ", spec.never_retry_exit_codes_size(),
                                                      " codes; at most ", kMaxNeverRetryCodes));
  }
  for (int code : spec.never_retry_exit_codes()) {
    if (code < 1 || code > 255) {
      return Bad("never_retry_exit_codes", absl::StrCat("exit codes are in [1, 255], got ", code));
    }
  }
  return absl::OkStatus();
}

absl::Status AbsolutePath(const char* field, const std::string& path) {
  if (!path.empty() && path[0] != '/') {
    return Bad(field, absl::StrCat("must be an absolute path, got \"", path, "\""));
  }
  return absl::OkStatus();
}

// Where ranks start and where they checkpoint.
absl::Status ValidateFiles(const v1::JobSpec& spec) {
  RETURN_IF_ERROR(AbsolutePath("working_dir", spec.working_dir()));
  RETURN_IF_ERROR(AbsolutePath("checkpoint_dir", spec.checkpoint_dir()));
  if (!spec.resume_from().empty()) {
    if (absl::Status id = ValidateJobId(spec.resume_from()); !id.ok()) {
      return Bad("resume_from", std::string(id.message()));
    }
  }
  if (!spec.has_code()) return absl::OkStatus();
  if (!IsSha256Hex(spec.code().sha256())) {
    return Bad("code.sha256",
               absl::StrCat("must be 64 lowercase hex digits, got \"", spec.code().sha256(), "\""));
  }
  if (!spec.working_dir().empty()) {
    return Bad("working_dir", "a job with uploaded code starts in it; give one or the other");
  }
  return absl::OkStatus();
}

// The image ranks run in, and when it is pulled.
absl::Status ValidateImage(const v1::JobSpec& spec) {
  if (spec.image().empty()) {
    if (!spec.image_pull().empty()) return Bad("image_pull", "is for a job with an image");
    return absl::OkStatus();
  }
  if (absl::StatusOr<ImageReference> ref = ParseImageReference(spec.image()); !ref.ok()) {
    return Bad("image", std::string(ref.status().message()));
  }
  if (spec.has_trainer()) {
    return Bad("image",
               "runs a command; the built-in trainer runs on the worker's host (give `command`, "
               "or leave out `image`)");
  }
  if (spec.preflight()) {
    return Bad("preflight",
               "runs the worker's own trainer before the command, which a job's image does not "
               "have: leave it out for a job with an image");
  }
  return CheckOneOf("image_pull", spec.image_pull(), {"if_not_present", "always"});
}

// A NUL ends a C string: execve would pass what comes before it alone.
absl::Status NoNul(const std::string& field, const std::string& value) {
  const size_t at = value.find('\0');
  if (at == std::string::npos) return absl::OkStatus();
  return Bad(field, absl::StrCat("holds a NUL byte at offset ", at,
                                 "; the process would get only what comes before it"));
}

}  // namespace

bool IsReservedEnvName(const std::string& name) {
  static const auto* reserved = new std::set<std::string>{"RANK",
                                                          "LOCAL_RANK",
                                                          "WORLD_SIZE",
                                                          "LOCAL_WORLD_SIZE",
                                                          "GROUP_RANK",
                                                          "GROUP_WORLD_SIZE",
                                                          "ROLE_RANK",
                                                          "ROLE_NAME",
                                                          "ROLE_WORLD_SIZE",
                                                          "MASTER_ADDR",
                                                          "MASTER_PORT",
                                                          "TORCHELASTIC_RESTART_COUNT",
                                                          "TORCHELASTIC_MAX_RESTARTS",
                                                          "TORCHELASTIC_RUN_ID",
                                                          "TORCHELASTIC_ERROR_FILE",
                                                          "CUDA_VISIBLE_DEVICES"};
  return reserved->count(name) > 0 || absl::StartsWith(name, "RINGMASTER_");
}

// What execve is given must fit: each "KEY=VALUE" and each argument below
// Linux's MAX_ARG_STRLEN, all of them below `max_bytes` (else the rank
// would fail at exec with "Argument list too long").
absl::Status CheckExecSize(const v1::JobSpec& spec, int64_t max_bytes) {
  int64_t total = 0;
  for (const auto& [name, value] : spec.env()) {
    const int64_t bytes = static_cast<int64_t>(name.size() + value.size() + 2);
    if (bytes > kMaxEnvEntryBytes) {
      return Bad(absl::StrCat("env.", name), absl::StrCat("is ", bytes,
                                                          " bytes; a variable may "
                                                          "hold at most ",
                                                          kMaxEnvEntryBytes));
    }
    total += bytes;
  }
  for (int i = 0; i < spec.command_size(); ++i) {
    const int64_t bytes = static_cast<int64_t>(spec.command(i).size() + 1);
    if (bytes > kMaxEnvEntryBytes) {
      return Bad(
          absl::StrCat("command[", i, "]"),
          absl::StrCat("is ", bytes, " bytes; an argument may hold at most ", kMaxEnvEntryBytes));
    }
    total += bytes;
  }
  if (total > max_bytes) {
    return Bad("env and command", absl::StrCat("hold ", total, " bytes; the limit is ", max_bytes,
                                               " (coordinator --max-env-bytes)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateJobSpec(const v1::JobSpec& spec, const SpecLimits& limits) {
  const int64_t spec_bytes = static_cast<int64_t>(spec.ByteSizeLong());
  if (spec_bytes > limits.max_spec_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("the job spec is ", spec_bytes,
                                                   " bytes; the limit is ", limits.max_spec_bytes,
                                                   " (coordinator --max-spec-bytes)"));
  }
  RETURN_IF_ERROR(CheckExecSize(spec, limits.max_env_bytes));
  if (!IsValidName(spec.name())) {
    return Bad("name", absl::StrCat("must be 1-", kMaxNameLength,
                                    " lowercase letters, digits or '-', not "
                                    "starting or ending with '-'; got \"",
                                    spec.name(), "\""));
  }
  if (spec.ranks() < 1 || spec.ranks() > kMaxRanks) {
    return Bad("ranks", absl::StrCat("must be in [1, ", kMaxRanks, "], got ", spec.ranks()));
  }
  if (spec.min_ranks() < 0 || spec.min_ranks() > spec.ranks()) {
    return Bad("min_ranks",
               absl::StrCat("must be in [1, ranks=", spec.ranks(), "], got ", spec.min_ranks()));
  }
  if (spec.gpus_per_rank() < 0 || spec.gpus_per_rank() > 16) {
    return Bad("gpus_per_rank", absl::StrCat("must be in [0, 16], got ", spec.gpus_per_rank()));
  }
  if (spec.max_restarts() < 0 || spec.max_restarts() > 1000) {
    return Bad("max_restarts", absl::StrCat("must be in [0, 1000], got ", spec.max_restarts()));
  }
  for (const auto& [field, seconds] :
       {std::pair<const char*, int>{"start_timeout_s", spec.start_timeout_s()},
        {"hang_timeout_s", spec.hang_timeout_s()},
        {"scale_up_after_s", spec.scale_up_after_s()}}) {
    if (seconds < 0 || seconds > kMaxTimeoutSeconds) {
      return Bad(field, absl::StrCat("must be in [0, ", kMaxTimeoutSeconds,
                                     "] seconds (0 turns it off), got ", seconds));
    }
  }
  RETURN_IF_ERROR(ValidateResources(spec));
  RETURN_IF_ERROR(ValidatePlacementAndPolicy(spec));
  for (const auto& [name, value] : spec.env()) {
    if (!IsValidEnvName(name)) {
      return Bad(absl::StrCat("env.", name),
                 "is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)");
    }
    if (IsReservedEnvName(name)) {
      return Bad(absl::StrCat("env.", name),
                 "is set by Ringmaster for every rank and cannot be overridden");
    }
    RETURN_IF_ERROR(NoNul(absl::StrCat("env.", name), value));
  }
  for (int i = 0; i < spec.command_size(); ++i) {
    RETURN_IF_ERROR(NoNul(absl::StrCat("command[", i, "]"), spec.command(i)));
  }
  RETURN_IF_ERROR(NoNul("working_dir", spec.working_dir()));
  RETURN_IF_ERROR(NoNul("checkpoint_dir", spec.checkpoint_dir()));
  const bool has_trainer = spec.has_trainer();
  const bool has_command = spec.command_size() > 0;
  if (has_trainer == has_command) {
    return Bad("trainer/command", "exactly one of trainer and command is required");
  }
  if (has_command && spec.command(0).empty()) {
    return Bad("command[0]", "must name a program");
  }
  RETURN_IF_ERROR(ValidateFiles(spec));
  RETURN_IF_ERROR(ValidateImage(spec));
  if (has_trainer) {
    return ValidateTrainer(spec.trainer(), std::max(spec.gpus_per_rank(), spec.resources().gpus()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ParseTopologyLevels(const std::string& text) {
  std::vector<std::string> levels;
  if (text.empty()) return levels;
  for (absl::string_view level : absl::StrSplit(text, ',')) {
    if (absl::Status valid = ValidateLabel(level, "");
        !valid.ok() || level.find('/') != level.npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--topology-levels: \"", level,
          "\" is not a level name (a label key without a prefix: 1-63 of [A-Za-z0-9._-])"));
    }
    if (std::find(levels.begin(), levels.end(), level) != levels.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--topology-levels: \"", level, "\" is given twice"));
    }
    levels.emplace_back(level);
  }
  return levels;
}

absl::Status ValidatePlacement(const v1::JobSpec& spec, const std::vector<std::string>& levels) {
  const v1::Placement& placement = spec.placement();
  RETURN_IF_ERROR(CheckOneOf("placement.mode", placement.mode(), {"required", "preferred"}));
  if (!placement.mode().empty() && placement.pack().empty()) {
    return Bad("placement.mode", "is for placement.pack (give the level to pack the job in)");
  }
  auto level = [&](const std::string& field, const std::string& name, int* index) {
    *index = -1;
    if (name.empty()) return absl::OkStatus();
    if (levels.empty()) {
      return Bad(field, absl::StrCat("this cluster has no --topology-levels, so no level \"", name,
                                     "\"; leave placement out"));
    }
    auto at = std::find(levels.begin(), levels.end(), name);
    if (at == levels.end()) {
      return Bad(field, absl::StrCat("\"", name, "\" is not a level of this cluster's ",
                                     "--topology-levels (", absl::StrJoin(levels, ", "), ")"));
    }
    *index = static_cast<int>(at - levels.begin());
    return absl::OkStatus();
  };
  int pack = -1, spread = -1;
  RETURN_IF_ERROR(level("placement.pack", placement.pack(), &pack));
  RETURN_IF_ERROR(level("placement.spread", placement.spread(), &spread));
  if (spread >= 0 && spec.ranks_per_worker() > 1) {
    return Bad("placement.spread", absl::StrCat("one rank per ", placement.spread(),
                                                " and ranks_per_worker: ", spec.ranks_per_worker(),
                                                " cannot both hold"));
  }
  if (pack >= 0 && spread >= 0 && spread <= pack) {
    return Bad("placement.spread",
               absl::StrCat(placement.spread(), " is no narrower than placement.pack (",
                            placement.pack(), "): one rank per ", placement.spread(),
                            " within one ", placement.pack(), " is a single rank"));
  }
  return absl::OkStatus();
}

void ApplyJobSpecDefaults(v1::JobSpec* spec) {
  if (spec->min_ranks() == 0) spec->set_min_ranks(spec->ranks());
  if (spec->gpus_per_rank() == 0) spec->set_gpus_per_rank(spec->resources().gpus());
  spec->mutable_resources()->set_gpus(spec->gpus_per_rank());
  if (!spec->has_max_restarts()) spec->set_max_restarts(3);
  if (!spec->has_start_timeout_s()) spec->set_start_timeout_s(120);
  if (!spec->has_scale_up_after_s()) spec->set_scale_up_after_s(30);
  if (spec->restart_policy().empty()) spec->set_restart_policy("on_failure");
  if (spec->on_straggler().empty()) spec->set_on_straggler("warn");
  if (!spec->image().empty() && spec->image_pull().empty()) spec->set_image_pull("if_not_present");
  if (!spec->placement().pack().empty() && spec->placement().mode().empty()) {
    spec->mutable_placement()->set_mode("required");
  }
  if (spec->priority().empty()) spec->set_priority("normal");
  if (!spec->has_preemptible()) spec->set_preemptible(true);
  if (!spec->has_preemption_grace_s()) spec->set_preemption_grace_s(30);
  // A command may run quietly for long; a trainer reports every step.
  if (!spec->has_hang_timeout_s()) spec->set_hang_timeout_s(spec->has_trainer() ? 600 : 0);
  if (!spec->has_trainer()) return;
  v1::TrainerSpec* t = spec->mutable_trainer();
  if (t->model().type().empty()) t->mutable_model()->set_type("mlp");
  if (t->data().format().empty()) t->mutable_data()->set_format("csv");
  if (t->data().test_fraction() == 0) t->mutable_data()->set_test_fraction(0.2);
  if (t->epochs() == 0) t->set_epochs(1);
  if (t->batch_size() == 0) t->set_batch_size(64);
  auto* opt = t->mutable_optimizer();
  if (opt->type().empty()) opt->set_type("adamw");
  if (opt->lr() == 0) opt->set_lr(1e-3);
  if (opt->beta1() == 0) opt->set_beta1(0.9);
  if (opt->beta2() == 0) opt->set_beta2(0.999);
  if (opt->eps() == 0) opt->set_eps(1e-8);
  if (t->lr_scaling().empty()) t->set_lr_scaling("linear");
  if (t->grad_accum_steps() == 0) t->set_grad_accum_steps(1);
  if (t->bucket_mb() == 0) t->set_bucket_mb(25);
  if (t->precision().empty()) t->set_precision("fp32");
  if (t->grad_compression().empty()) t->set_grad_compression("none");
  if (!t->has_checkpoint_every_s()) t->set_checkpoint_every_s(300);
  if (!t->has_snapshot_every_steps()) t->set_snapshot_every_steps(1);
}

}  // namespace ringmaster
