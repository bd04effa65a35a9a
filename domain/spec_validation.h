// Checks a submitted JobSpec before anything is stored.
#ifndef RINGMASTER_DOMAIN_SPEC_VALIDATION_H_
#define RINGMASTER_DOMAIN_SPEC_VALIDATION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/limits.h"
#include "proto/job.pb.h"

namespace ringmaster {

struct SpecLimits {
  int64_t max_spec_bytes = kDefaultMaxSpecBytes;  // the spec as stored
  int64_t max_env_bytes = kDefaultMaxEnvBytes;    // env entries and command words in all
};

// OK, or INVALID_ARGUMENT whose message names the first bad field by its
// YAML path ("trainer.optimizer.lr") and says why, or the limit it breaks.
absl::Status ValidateJobSpec(const v1::JobSpec& spec, const SpecLimits& limits = {});

// --topology-levels ("block,rack,host"): names as a label key's, each once.
// INVALID_ARGUMENT naming the one that is not.
absl::StatusOr<std::vector<std::string>> ParseTopologyLevels(const std::string& text);

// OK, or INVALID_ARGUMENT naming the field of spec.placement that names no
// level of `levels` (the coordinator's --topology-levels, widest first), or
// asks what cannot be (spread at a level no narrower than pack).
absl::Status ValidatePlacement(const v1::JobSpec& spec, const std::vector<std::string>& levels);

// Fills the fields a valid spec may leave out (min_ranks, trainer defaults).
void ApplyJobSpecDefaults(v1::JobSpec* spec);

// Environment variables the rank contract owns; a spec may not set them.
bool IsReservedEnvName(const std::string& name);

}  // namespace ringmaster

#endif  // RINGMASTER_DOMAIN_SPEC_VALIDATION_H_
