// A fuzz target's properties: a broken one names itself, then aborts (which
// libFuzzer reports as a crash, with the input that broke it).
#ifndef RINGMASTER_TESTS_FUZZ_REQUIRE_H_
#define RINGMASTER_TESTS_FUZZ_REQUIRE_H_

#include <cstdio>
#include <cstdlib>

namespace ringmaster {

inline void Require(bool holds, const char* property) {
  if (holds) return;
  std::fprintf(stderr, "property broken: %s\n", property);
  std::abort();
}

}  // namespace ringmaster

#endif  // RINGMASTER_TESTS_FUZZ_REQUIRE_H_
