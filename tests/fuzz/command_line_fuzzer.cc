// The CLI's argument parsing on any arguments (the input split at NUL
// bytes): an invocation, or help with 0, or one error line with 2; never
// a crash or an exception out of the parser.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "client/command_line.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args(1);
  for (size_t i = 0; i < size && args.size() < 16; ++i) {
    if (data[i] == '\0') {
      args.emplace_back();
    } else {
      args.back().push_back(static_cast<char>(data[i]));
    }
  }
  const ringmaster::ParsedCommandLine parsed = ringmaster::ParseCommandLine(args);
  if (parsed.invocation) {
    if (parsed.exit_code != 0 || !parsed.err.empty()) std::abort();
    return 0;
  }
  if (parsed.exit_code == 0 && parsed.out.empty()) std::abort();  // help printed
  if (parsed.exit_code == 2 && parsed.err.find('\n') != parsed.err.size() - 1) std::abort();
  if (parsed.exit_code != 0 && parsed.exit_code != 2) std::abort();
  return 0;
}
