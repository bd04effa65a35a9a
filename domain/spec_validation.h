// Checks a submitted JobSpec before anything is stored.
#ifndef RINGMASTER_DOMAIN_SPEC_VALIDATION_H_
#define RINGMASTER_DOMAIN_SPEC_VALIDATION_H_

#include "absl/status/status.h"
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

// Fills the fields a valid spec may leave out (min_ranks, trainer defaults).
void ApplyJobSpecDefaults(v1::JobSpec* spec);

// Environment variables the rank contract owns; a spec may not set them.
bool IsReservedEnvName(const std::string& name);

}  // namespace ringmaster

#endif  // RINGMASTER_DOMAIN_SPEC_VALIDATION_H_
