// The checkpoint loader on any bytes: DATA_LOSS or a state, never a crash
// nor a read past the data; a state it accepts encodes back to the same
// bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "trainer/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ringmaster::TrainingState> state =
      ringmaster::DecodeCheckpoint(bytes, "fuzz");
  if (!state.ok()) {
    if (state.status().code() != absl::StatusCode::kDataLoss) std::abort();
    return 0;
  }
  if (ringmaster::EncodeCheckpoint(*state) != bytes) std::abort();
  return 0;
}
