#include "trainer/preflight_check.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster {

absl::StatusOr<double> PreflightBusBandwidth(Collective* comm, float* buffer, size_t floats) {
  // The warm-up connects what connects lazily; a small one suffices.
  RETURN_IF_ERROR(comm->AllReduceSum(buffer, std::min<size_t>(floats, 1 << 18)));
  RETURN_IF_ERROR(comm->Barrier());
  const auto start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(comm->AllReduceSum(buffer, floats));
  RETURN_IF_ERROR(comm->Barrier());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double algbw = static_cast<double>(floats * sizeof(float)) / std::max(seconds, 1e-9);
  const int n = comm->size();
  return (n > 1 ? algbw * 2.0 * (n - 1) / n : algbw) / 1e9;
}

int PreflightPartner(int rank, int size, int round) {
  if (round == 0) {
    const int peer = rank ^ 1;
    return peer < size ? peer : -1;
  }
  if (size <= 2) return -1;  // the same pair again
  if (round == 2) {
    // An odd count leaves the last rank out of round 0 and rank 0 out of
    // round 1: they meet here.
    if (size % 2 == 0) return -1;
    return rank == 0 ? size - 1 : rank == size - 1 ? 0 : -1;
  }
  // Round 1 pairs (1,2), (3,4)...; with an even count, (size-1, 0) too.
  // Round 0's pairing of the ranks shifted down by one: 1 -> 0, ..., 0 -> size-1.
  const int peer_shifted = ((rank + size - 1) % size) ^ 1;
  return peer_shifted < size ? (peer_shifted + 1) % size : -1;
}

std::vector<int> PreflightPeers(const std::vector<PreflightPlace>& places, int round) {
  const int size = static_cast<int>(places.size());
  int groups = 0;
  std::map<std::pair<int, int>, int> rank_at;  // (group, local rank) -> rank
  for (int rank = 0; rank < size; ++rank) {
    groups = std::max(groups, places[rank].group + 1);
    rank_at[{places[rank].group, places[rank].local_rank}] = rank;
  }
  std::vector<int> peers(size, -1);
  for (int rank = 0; rank < size; ++rank) {
    if (groups == 1) {
      peers[rank] = PreflightPartner(rank, size, round);
      continue;
    }
    const int group = PreflightPartner(places[rank].group, groups, round);
    auto peer = rank_at.find({group, places[rank].local_rank});
    if (group >= 0 && peer != rank_at.end()) peers[rank] = peer->second;
  }
  return peers;
}

absl::StatusOr<PreflightReport> MeasurePreflight(Collective* world, PreflightPlace place,
                                                 const ConnectGroup& connect,
                                                 const std::string& prefix, float* buffer,
                                                 size_t floats) {
  const int rank = world->rank();
  const int size = world->size();
  // Every rank's place, each rank's pair of values summed into the table.
  std::vector<float> table(2 * static_cast<size_t>(size), 0.0f);
  table[2 * rank] = static_cast<float>(place.group);
  table[2 * rank + 1] = static_cast<float>(place.local_rank);
  RETURN_IF_ERROR(world->AllReduceSum(table.data(), table.size()));
  std::vector<PreflightPlace> places(size);
  for (int r = 0; r < size; ++r) {
    places[r] = {static_cast<int>(table[2 * r]), static_cast<int>(table[2 * r + 1])};
  }
  PreflightReport report;
  bool paired = false;
  for (int round = 0; round < kPreflightRounds; ++round) {
    const int peer = PreflightPeers(places, round)[rank];
    if (peer < 0) continue;
    const std::string pair_prefix = absl::StrCat(prefix, "/round-", round, "/",
                                                 std::min(rank, peer), "-", std::max(rank, peer));
    absl::StatusOr<std::unique_ptr<Collective>> pair = connect(pair_prefix, rank < peer ? 0 : 1, 2);
    if (!pair.ok()) {
      return absl::Status(pair.status().code(), absl::StrCat("connecting to peer rank ", peer, ": ",
                                                             pair.status().message()));
    }
    absl::StatusOr<double> busbw = PreflightBusBandwidth(pair->get(), buffer, floats);
    if (!busbw.ok()) {
      return absl::Status(busbw.status().code(), absl::StrCat("all-reduce with peer rank ", peer,
                                                              ": ", busbw.status().message()));
    }
    report.bus_gb_per_s = std::max(report.bus_gb_per_s, *busbw);
    paired = true;
  }
  ASSIGN_OR_RETURN(report.world_gb_per_s, PreflightBusBandwidth(world, buffer, floats));
  if (!paired) report.bus_gb_per_s = report.world_gb_per_s;
  return report;
}

absl::Status RunPreflight(Collective* world, PreflightPlace place, const ConnectGroup& connect,
                          PreflightBoard* board, float* buffer, size_t floats,
                          const PreflightOptions& options) {
  absl::StatusOr<PreflightReport> measured =
      MeasurePreflight(world, place, connect, "preflight/pairs", buffer, floats);
  PreflightReport report = measured.ok() ? *measured : PreflightReport{};
  if (!measured.ok()) report.error = std::string(measured.status().message());
  options.on_measured(report);
  const std::string key = PreflightReportKey(world->rank());
  const std::string value = EncodePreflightReport(report);
  const absl::Time deadline = absl::Now() + options.verdict_timeout;
  while (true) {
    // Posted again at each look: a coordinator that restarted meanwhile has
    // an empty scope.
    RETURN_IF_ERROR(board->Post(key, value));
    if (options.stop_requested()) return absl::CancelledError("stopped before the verdict");
    absl::StatusOr<std::string> verdict = board->Await(kPreflightVerdictKey, options.poll);
    if (verdict.ok()) {
      if (!measured.ok()) return measured.status();
      if (*verdict == kPreflightGo) return absl::OkStatus();
      return absl::FailedPreconditionError(absl::StrCat("pre-flight: ", *verdict));
    }
    if (!absl::IsDeadlineExceeded(verdict.status())) return verdict.status();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("pre-flight: no verdict from the coordinator within ",
                       absl::FormatDuration(options.verdict_timeout)));
    }
  }
}

}  // namespace ringmaster
