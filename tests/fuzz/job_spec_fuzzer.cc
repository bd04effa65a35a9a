// The job spec parser (YAML, and JSON which YAML contains) on any bytes:
// it returns a spec or an error naming a place, never crashes; a spec it
// returns goes through the coordinator's validation, which must not crash
// either and must give one line.
#include <cstddef>
#include <cstdint>
#include <string>

#include "domain/job_spec_yaml.h"
#include "domain/spec_validation.h"
#include "tests/fuzz/require.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ringmaster::v1::JobSpec> spec = ringmaster::ParseJobSpecYaml(text);
  if (!spec.ok()) {
    ringmaster::Require(!spec.status().message().empty(), "a parse error says what is wrong");
    return 0;
  }
  const absl::Status valid = ringmaster::ValidateJobSpec(*spec);
  ringmaster::Require(valid.ok() || !valid.message().empty(), "a refusal says what is wrong");
  return 0;
}
