#include "domain/stacks_summary.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringmaster {
namespace {

// A rank in a collective, able to go on once its peers arrive: one that is
// stopped or gone holds the others up, wherever it is.
bool Waits(const v1::RankStacks& r) {
  const bool held = r.process() == "stopped" || r.process() == "gone" || r.process() == "a zombie";
  return r.step() > 0 && r.phase() == "all-reduce" && !held;
}

// "(stopped)" and the like, for a process that is not simply running or
// waiting in the kernel.
std::string State(const v1::RankStacks& r) {
  return r.process() == "running" || r.process() == "sleeping" || r.process().empty()
             ? ""
             : absl::StrCat(" (", r.process(), ")");
}

std::string Ranks(const std::vector<int>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "));
}

}  // namespace

std::string RankStacksLine(const v1::RankStacks& r) {
  std::string where;
  if (r.step() > 0) {
    where = r.phase() == "all-reduce" && r.bucket() >= 0
                ? absl::StrCat("in all-reduce of bucket ", r.bucket(), " at step ", r.step())
                : absl::StrCat("in ", r.phase(), " at step ", r.step());
  } else if (!r.python().empty()) {
    where = absl::StrCat("in ", r.python());
  } else if (!r.native().empty()) {
    where = absl::StrCat("in ", r.native());
  } else {
    where = "somewhere its stacks do not say";
  }
  return absl::StrCat(where, " (", r.process().empty() ? "unknown" : r.process(), ")");
}

std::string SummarizeStacks(const std::vector<v1::RankStacks>& ranks) {
  // The ranks of the built-in trainer that wait in the latest collective
  // any rank waits in are the front; the other trainer ranks are those they
  // wait for.
  std::tuple<int64_t, int32_t> front{0, -1};
  for (const v1::RankStacks& r : ranks) {
    if (Waits(r)) front = std::max(front, std::tuple<int64_t, int32_t>{r.step(), r.bucket()});
  }
  std::vector<int> waiting;
  std::vector<const v1::RankStacks*> awaited;
  std::vector<std::string> others;  // ranks without a flight record
  for (const v1::RankStacks& r : ranks) {
    if (r.step() == 0) {
      others.push_back(absl::StrCat("rank ", r.rank(), ": ",
                                    r.summary().empty() ? RankStacksLine(r) : r.summary()));
    } else if (Waits(r) && std::tuple<int64_t, int32_t>{r.step(), r.bucket()} == front) {
      waiting.push_back(r.rank());
    } else {
      awaited.push_back(&r);
    }
  }
  std::vector<int> awaited_ranks;
  for (const v1::RankStacks* r : awaited) awaited_ranks.push_back(r->rank());
  std::vector<std::string> parts;
  const auto& [step, bucket] = front;
  if (!waiting.empty()) {
    std::string part =
        absl::StrCat(Ranks(waiting), waiting.size() == 1 ? " waits" : " wait", " in all-reduce");
    if (bucket >= 0) absl::StrAppend(&part, " of bucket ", bucket);
    absl::StrAppend(&part, " at step ", step);
    if (!awaited_ranks.empty()) absl::StrAppend(&part, " for ", Ranks(awaited_ranks));
    parts.push_back(std::move(part));
  }
  for (const v1::RankStacks* r : awaited) {
    std::string part = absl::StrCat("rank ", r->rank(), " is in ", r->phase());
    if (r->phase() == "all-reduce" && r->bucket() >= 0) {
      absl::StrAppend(&part, " of bucket ", r->bucket());
    }
    if (waiting.empty() || r->step() != step) absl::StrAppend(&part, " at step ", r->step());
    parts.push_back(absl::StrCat(part, State(*r)));
  }
  parts.insert(parts.end(), others.begin(), others.end());
  return absl::StrJoin(parts, "; ");
}

}  // namespace ringmaster
