// Reads a job spec from YAML (or JSON, which YAML contains) into JobSpec.
#ifndef RINGMASTER_DOMAIN_JOB_SPEC_YAML_H_
#define RINGMASTER_DOMAIN_JOB_SPEC_YAML_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"

namespace ringmaster {

// INVALID_ARGUMENT with one line naming the place: "line 3, column 5:
// ..." for syntax, or the field's path ("trainer.optimizer.lr: expected a
// number, got \"fast\"", "trainer.optimiser: unknown field") for content.
// Duplicate keys, documents nested too deep and specs over
// kDefaultMaxSpecBytes are refused. Only the shape is checked here; the
// coordinator validates values.
absl::StatusOr<v1::JobSpec> ParseJobSpecYaml(const std::string& text);

}  // namespace ringmaster

#endif  // RINGMASTER_DOMAIN_JOB_SPEC_YAML_H_
