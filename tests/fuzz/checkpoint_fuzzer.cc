// The checkpoint loader on any bytes: DATA_LOSS or a state, never a crash
// nor a read past the data; a state it accepts encodes back to the same
// bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/require.h"
#include "trainer/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ringmaster::TrainingState> state = ringmaster::DecodeCheckpoint(bytes, "fuzz");
  if (!state.ok()) {
    ringmaster::Require(state.status().code() == absl::StatusCode::kDataLoss,
                        "bad bytes are DATA_LOSS");
    return 0;
  }
  ringmaster::Require(ringmaster::EncodeCheckpoint(*state) == bytes,
                      "an accepted checkpoint encodes back to its bytes");
  return 0;
}
