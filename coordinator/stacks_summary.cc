#include "coordinator/stacks_summary.h"

#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringmaster {
namespace {

bool Waits(const v1::RankStacks& r) { return r.step() > 0 && r.phase() == "all-reduce"; }

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
  // Trainer ranks waiting in a collective, by (step, bucket), and those
  // that are not.
  std::map<std::tuple<int64_t, int32_t>, std::vector<int>> waiting;
  std::vector<const v1::RankStacks*> elsewhere;
  std::vector<std::string> others;  // ranks without a flight record
  for (const v1::RankStacks& r : ranks) {
    if (Waits(r)) {
      waiting[{r.step(), r.bucket()}].push_back(r.rank());
    } else if (r.step() > 0) {
      elsewhere.push_back(&r);
    } else {
      others.push_back(absl::StrCat("rank ", r.rank(), ": ",
                                    r.summary().empty() ? RankStacksLine(r) : r.summary()));
    }
  }
  std::vector<std::string> parts;
  std::vector<int> awaited;
  for (const v1::RankStacks* r : elsewhere) awaited.push_back(r->rank());
  for (const auto& [where, group] : waiting) {
    const auto& [step, bucket] = where;
    std::string part =
        absl::StrCat(Ranks(group), group.size() == 1 ? " waits" : " wait", " in all-reduce");
    if (bucket >= 0) absl::StrAppend(&part, " of bucket ", bucket);
    absl::StrAppend(&part, " at step ", step);
    if (!awaited.empty()) absl::StrAppend(&part, " for ", Ranks(awaited));
    parts.push_back(std::move(part));
  }
  int64_t waiting_step = waiting.empty() ? 0 : std::get<0>(waiting.begin()->first);
  for (const v1::RankStacks* r : elsewhere) {
    std::string part = absl::StrCat("rank ", r->rank(), " is in ", r->phase());
    if (r->step() != waiting_step) absl::StrAppend(&part, " at step ", r->step());
    parts.push_back(absl::StrCat(part, State(*r)));
  }
  parts.insert(parts.end(), others.begin(), others.end());
  return absl::StrJoin(parts, "; ");
}

}  // namespace ringmaster
