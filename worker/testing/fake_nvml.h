// Where the fake libnvidia-ml.so.1 (libfake_nvml.so) is in a test's
// runfiles. The test sets FAKE_NVML_DEVICES before loading it.
#ifndef RINGMASTER_WORKER_TESTING_FAKE_NVML_H_
#define RINGMASTER_WORKER_TESTING_FAKE_NVML_H_

#include <cstdlib>
#include <string>

namespace ringmaster::testing {

inline std::string FakeNvmlPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return std::string(srcdir ? srcdir : ".") + "/" + (workspace ? workspace : "ringmaster") +
         "/worker/testing/libfake_nvml.so";
}

}  // namespace ringmaster::testing

#endif  // RINGMASTER_WORKER_TESTING_FAKE_NVML_H_
