#include "worker/stack_capture.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/subprocess.h"
#include "worker/rank_dir.h"

namespace ringmaster {
namespace {

constexpr size_t kMaxStackBytes = 1 << 20;  // of one rank's stacks, each kind

char ProcessState(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  // "pid (comm) S ...": comm may hold spaces and parentheses; the state
  // follows the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return 0;
  return stat[close + 2];
}

// The size of the rank's stacks file: 0 when there is none, or when it is
// not one the worker reads (rank_dir.h).
int64_t StacksSize(const RankDir& dir) {
  absl::StatusOr<int64_t> size = dir.Size(kPythonStacksFile);
  return size.ok() ? *size : 0;
}

// Signals a Python rank and waits for faulthandler's dump to stop growing.
std::string PythonStacks(pid_t pid, const RankDir& dir, const StackCaptureOptions& options) {
  const int64_t before = StacksSize(dir);
  if (kill(pid, PythonStacksSignal()) != 0) return "";
  const absl::Time deadline = absl::Now() + options.python_wait;
  int64_t seen = before;
  absl::Time still_since = absl::InfiniteFuture();
  while (absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
    const int64_t size = StacksSize(dir);
    if (size > seen) {
      seen = size;
      still_since = absl::Now();
    } else if (seen > before && absl::Now() - still_since >= absl::Milliseconds(100)) {
      break;  // written, and no more for a while
    }
  }
  if (seen <= before) return "";
  absl::StatusOr<std::string> text = dir.Read(kPythonStacksFile, before, kMaxStackBytes);
  if (!text.ok()) {
    spdlog::warn("not reading the Python stacks of pid {}: {}", pid, text.status().ToString());
    return "";
  }
  return *std::move(text);
}

// The trainer's flight record, when the rank left one the worker reads.
std::optional<FlightState> Flight(const RankDir& dir) {
  absl::StatusOr<UniqueFd> fd = dir.OpenFile(kFlightRecordFile);
  if (!fd.ok()) {
    if (!absl::IsNotFound(fd.status())) {
      spdlog::warn("not reading a flight record: {}", fd.status().ToString());
    }
    return std::nullopt;
  }
  absl::StatusOr<FlightState> flight =
      ReadFlightRecord(fd->get(), absl::StrCat(dir.path(), "/", kFlightRecordFile));
  if (!flight.ok()) return std::nullopt;
  return *flight;
}

// Runs `argv` with its output captured, for at most `timeout`.
absl::StatusOr<std::string> Output(const std::vector<std::string>& argv, absl::Duration timeout) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError(strerror(errno));
  SubprocessSpec spec;
  spec.argv = argv;
  spec.env = CurrentEnvironment();
  spec.no_new_privs = true;
  spec.output_fd = fds[1];
  absl::StatusOr<pid_t> pid = SpawnProcess(spec);
  close(fds[1]);
  if (!pid.ok()) {
    close(fds[0]);
    return pid.status();
  }
  std::string out;
  const absl::Time deadline = absl::Now() + timeout;
  char buffer[8192];
  for (;;) {
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    pollfd p{fds[0], POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = read(fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    if (out.size() < kMaxStackBytes) out.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  kill(*pid, SIGKILL);  // done, or out of time
  waitpid(*pid, nullptr, 0);
  return out;
}

}  // namespace

int PythonStacksSignal() { return SIGRTMIN + 5; }

std::string ProcessStateName(char state) {
  switch (state) {
    case 'R':
      return "running";
    case 'S':
      return "sleeping";
    case 'D':
      return "in uninterruptible sleep";
    case 'T':
    case 't':
      return "stopped";
    case 'Z':
      return "a zombie";
    case 0:
      return "gone";
    default:
      return std::string(1, state);
  }
}

bool CatchesSignal(pid_t pid, int signal) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "SigCgt:")) continue;
    uint64_t mask = 0;
    if (!absl::SimpleHexAtoi(absl::StripAsciiWhitespace(rest), &mask)) return false;
    return signal >= 1 && signal <= 64 && (mask >> (signal - 1)) & 1;
  }
  return false;
}

RankStackCapture CaptureStacks(pid_t pid, const StackCaptureOptions& options) {
  RankStackCapture capture;
  capture.state = ProcessState(pid);
  if (capture.state == 0) return capture;
  std::optional<RankDir> dir;
  if (!options.rank_dir.empty()) {
    const uid_t rank_uid = options.rank_user ? options.rank_user->uid : geteuid();
    absl::StatusOr<RankDir> opened = RankDir::Open(options.rank_dir, rank_uid);
    if (opened.ok()) {
      dir = *std::move(opened);
    } else {
      spdlog::warn("no flight record or Python stacks of pid {}: {}", pid,
                   opened.status().ToString());
    }
  }
  if (dir) capture.flight = Flight(*dir);
  // A stopped process runs no handler: its Python stack stays unknown.
  if (dir && capture.state != 'T' && capture.state != 't' &&
      CatchesSignal(pid, PythonStacksSignal())) {
    capture.python = PythonStacks(pid, *dir, options);
  }
  absl::StatusOr<std::string> native =
      Output({options.eu_stack, "-p", absl::StrCat(pid)}, options.native_timeout);
  capture.native = native.ok() ? *std::move(native)
                               : absl::StrCat("no native stacks: ", native.status().message());
  return capture;
}

std::string PythonSummary(const std::string& text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  std::string first;
  bool current = false;
  for (absl::string_view line : lines) {
    if (absl::StartsWith(line, "Current thread ")) {
      current = true;
      continue;
    }
    if (absl::StartsWith(line, "Thread ")) current = false;
    absl::string_view frame = absl::StripAsciiWhitespace(line);
    if (!absl::StartsWith(frame, "File \"")) continue;
    if (current) return std::string(frame);
    if (first.empty()) first = std::string(frame);
  }
  return first;
}

std::string NativeSummary(const std::string& text) {
  std::vector<std::string> frames;
  bool in_first_thread = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "TID ")) {
      if (in_first_thread) break;
      in_first_thread = true;
      continue;
    }
    if (!in_first_thread || !absl::StartsWith(line, "#")) continue;
    // "#0  0x00007f1c2a8e4f3f __GI___poll": the function follows the address.
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() >= 3) frames.push_back(std::string(fields[2]));
    if (frames.size() == 3) break;
  }
  return absl::StrJoin(frames, " < ");
}

}  // namespace ringmaster
