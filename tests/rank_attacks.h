// The attacks one rank can make on another job's rank on the same worker,
// as a shell script a job runs: read the victim's environment (and so its
// job token), see, stop and signal its process, list or write its code,
// plant the error file its worker reads when it fails, and read its
// snapshot segment. The script needs VICTIM_PID, VICTIM_CODE and
// VICTIM_ERROR_FILE in its environment and a POSIX shell with grep, kill,
// ls, head, od and readlink (busybox has them all).
#ifndef RINGMASTER_TESTS_RANK_ATTACKS_H_
#define RINGMASTER_TESTS_RANK_ATTACKS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace ringmaster {

// Each attack prints "ATTACK <name>: done" or "ATTACK <name>: refused".
// The first two are the same acts on the attacker's own environment and
// process, which must be done: they show the tools are there.
constexpr char kRankAttacks[] = R"(
try() { name=$1; shift; if "$@" > /dev/null 2>&1; then echo "ATTACK $name: done"; else echo "ATTACK $name: refused"; fi; }
try own-environ grep -q RINGMASTER_JOB_TOKEN /proc/self/environ
try own-process sh -c 'kill -0 $$ && test -e /proc/$$/status && readlink /proc/$$/exe && ls / && head -c 16 /proc/$$/status | od -c | grep -q .'
try read-environ grep -q RINGMASTER_JOB_TOKEN /proc/$VICTIM_PID/environ
try see-process test -e /proc/$VICTIM_PID/status
try stop-process kill -STOP $VICTIM_PID
kill -CONT $VICTIM_PID 2> /dev/null
try signal-process kill -0 $VICTIM_PID
try list-code ls $VICTIM_CODE
try write-code sh -c 'echo evil > $VICTIM_CODE/evil'
try plant-error-file sh -c 'echo "{\"message\": \"forged\"}" > $VICTIM_ERROR_FILE'
try read-snapshot sh -c 'for f in /proc/$VICTIM_PID/fd/*; do case $(readlink $f) in *ringmaster-snapshot*) head -c 16 $f | od -c | grep -q . && exit 0;; esac; done; exit 1'
echo ATTACKS DONE
)";

inline const std::vector<std::string>& RankAttackControls() {
  static const auto* names = new std::vector<std::string>{"own-environ", "own-process"};
  return *names;
}

inline const std::vector<std::string>& RankAttackNames() {
  static const auto* names = new std::vector<std::string>{
      "read-environ", "see-process", "stop-process",     "signal-process",
      "list-code",    "write-code",  "plant-error-file", "read-snapshot"};
  return *names;
}

// The job spec's `command:` running the attacks (YAML, at the top level).
inline std::string RankAttacksCommand() {
  return absl::StrCat("command:\n  - sh\n  - -c\n  - |\n",
                      absl::StrReplaceAll(kRankAttacks, {{"\n", "\n    "}}));
}

// Each attack's verdict ("done" or "refused") in rank 0's log lines.
inline std::map<std::string, std::string> RankAttackVerdicts(const std::string& logs) {
  std::map<std::string, std::string> verdicts;
  for (absl::string_view line : absl::StrSplit(logs, '\n')) {
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(": ", 1));
    if (parts.size() == 2 && absl::StartsWith(parts[0], "[rank 0] ATTACK ")) {
      verdicts[parts[0].substr(16)] = parts[1];
    }
  }
  return verdicts;
}

}  // namespace ringmaster

#endif  // RINGMASTER_TESTS_RANK_ATTACKS_H_
