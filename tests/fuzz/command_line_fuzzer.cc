// The CLI's argument parsing on any arguments (the input split at NUL
// bytes): an invocation, or help with 0, or one error line with 2; never
// a crash or an exception out of the parser.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "client/command_line.h"
#include "tests/fuzz/require.h"

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
    ringmaster::Require(parsed.exit_code == 0 && parsed.err.empty(), "a run says nothing yet");
    return 0;
  }
  ringmaster::Require(parsed.exit_code == 0 || parsed.exit_code == 2, "exit 0 or 2");
  ringmaster::Require(parsed.exit_code != 0 || !parsed.out.empty(), "help is printed");
  ringmaster::Require(parsed.exit_code != 2 || parsed.err.find('\n') == parsed.err.size() - 1,
                      "an error is one line");
  return 0;
}
