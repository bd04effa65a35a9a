#include "worker/rank_cgroups.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

constexpr char kRoot[] = "/sys/fs/cgroup";

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The value of `key` in a "key value" file (memory.events, oom_control).
int64_t ReadKey(const std::string& path, const std::string& key) {
  std::istringstream in(ReadFile(path));
  std::string k;
  int64_t v;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

// This process's cgroup path in each hierarchy: controller -> path, with
// "" for the v2 tree ("0::/path").
std::map<std::string, std::string> OwnCgroups() {
  std::map<std::string, std::string> out;
  std::istringstream in(ReadFile("/proc/self/cgroup"));
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3) continue;
    for (absl::string_view controller : absl::StrSplit(parts[1], ',')) {
      out[std::string(controller)] = parts[2];
    }
  }
  return out;
}

// Makes `dir` (and its parents) and checks that this process may create
// cgroups in it.
bool Usable(const std::string& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  return !error && access(dir.c_str(), W_OK) == 0;
}

// An eventfd signalled when the v1 memory cgroup `dir` runs out of memory
// (its memory.oom_control, through cgroup.event_control).
absl::StatusOr<UniqueFd> WatchOom(const std::string& dir) {
  UniqueFd events(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  const std::string control = dir + "/memory.oom_control";
  UniqueFd oom_control(open(control.c_str(), O_RDONLY | O_CLOEXEC));
  if (!events.valid() || !oom_control.valid() ||
      !WriteFile(dir + "/cgroup.event_control",
                 absl::StrCat(events.get(), " ", oom_control.get()))) {
    return absl::InternalError(
        absl::StrCat("cannot watch ", control, " for the rank's OOM: ", strerror(errno)));
  }
  return events;
}

}  // namespace

std::string RankCgroups::NameFor(const std::string& worker_id, const std::string& state_dir) {
  std::error_code error;
  const std::string path = fs::absolute(state_dir, error).lexically_normal().string();
  uint32_t hash = 2166136261u;  // FNV-1a: stable across builds and upgrades
  for (unsigned char c : path) hash = (hash ^ c) * 16777619u;
  return absl::StrCat("ringmaster-", worker_id, "-", absl::Hex(hash, absl::kZeroPad8));
}

absl::StatusOr<std::unique_ptr<RankCgroups>> RankCgroups::Open(const std::string& name) {
  const std::map<std::string, std::string> own = OwnCgroups();
  std::vector<Hierarchy> found;
  const std::string v2_controllers = ReadFile(absl::StrCat(kRoot, "/cgroup.controllers"));
  if (v2_controllers.find("memory") != std::string::npos && own.count("")) {
    // A pure v2 host: processes may not sit in a cgroup whose controllers
    // are handed down, so the worker moves into a leaf of its own first.
    const std::string base = absl::StrCat(kRoot, own.at(""));
    const std::string leaf = base + "/ringmaster-worker-process";
    if (!WriteFile(base + "/cgroup.subtree_control", "+memory +pids") && Usable(leaf)) {
      WriteFile(leaf + "/cgroup.procs", "0");
      WriteFile(base + "/cgroup.subtree_control", "+memory +pids");
    }
    const std::string dir = base + "/" + name;
    if (Usable(dir)) {
      WriteFile(dir + "/cgroup.subtree_control", "+memory +pids");
      found.push_back({dir, true, true, false, fs::exists(dir + "/cgroup.kill")});
    }
  } else {
    for (const char* controller : {"memory", "pids", "freezer"}) {
      auto it = own.find(controller);
      if (it == own.end()) continue;
      const std::string dir = absl::StrCat(kRoot, "/", controller, it->second, "/", name);
      if (!Usable(dir)) continue;
      const std::string c = controller;
      found.push_back({dir, c == "memory", false, c == "freezer", false});
    }
    // The v2 tree beside v1 (hybrid hosts) tracks every process too, and
    // kills a whole cgroup at once where the kernel has cgroup.kill.
    auto unified = own.find("");
    const std::string unified_root = absl::StrCat(kRoot, "/unified");
    if (unified != own.end() && fs::exists(unified_root + "/cgroup.procs")) {
      const std::string dir = unified_root + unified->second + "/" + name;
      if (Usable(dir)) found.push_back({dir, false, true, false, fs::exists(dir + "/cgroup.kill")});
    }
  }
  if (found.empty()) {
    return absl::UnavailableError(
        "no writable cgroup hierarchy (cgroup v2 with memory, or v1 memory/pids/freezer)");
  }
  return std::unique_ptr<RankCgroups>(new RankCgroups(std::move(found)));
}

RankCgroups::~RankCgroups() {
  for (const Hierarchy& h : hierarchies_) rmdir(h.dir.c_str());
}

absl::StatusOr<UniqueFd> RankCgroups::Create(const std::string& rank, int64_t memory_bytes) const {
  UniqueFd oom_events;
  for (const Hierarchy& h : hierarchies_) {
    const std::string dir = Dir(h, rank);
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::InternalError(absl::StrCat("mkdir ", dir, ": ", strerror(errno)));
    }
    if (h.memory && memory_bytes > 0) {
      const std::string limit = h.v2 ? "/memory.max" : "/memory.limit_in_bytes";
      if (!WriteFile(dir + limit, absl::StrCat(memory_bytes))) {
        return absl::InternalError(absl::StrCat("cannot set ", dir, limit));
      }
      if (h.v2) WriteFile(dir + "/memory.swap.max", "0");
      if (!h.v2) {
        absl::StatusOr<UniqueFd> watch = WatchOom(dir);
        if (!watch.ok()) return watch.status();
        oom_events = *std::move(watch);
      }
    }
  }
  return oom_events;
}

std::vector<std::string> RankCgroups::ProcsFiles(const std::string& rank) const {
  std::vector<std::string> files;
  for (const Hierarchy& h : hierarchies_) files.push_back(Dir(h, rank) + "/cgroup.procs");
  return files;
}

std::vector<std::string> RankCgroups::Subtree(const Hierarchy& h, const std::string& rank) const {
  std::vector<std::string> dirs = {Dir(h, rank)};
  std::error_code error;
  for (fs::recursive_directory_iterator it(dirs.front(), error), end; !error && it != end;
       it.increment(error)) {
    if (it->is_directory(error) && !it->is_symlink(error)) dirs.push_back(it->path().string());
  }
  return dirs;
}

std::vector<pid_t> RankCgroups::Processes(const std::string& rank) const {
  // The rank's cgroup and those below it (an OCI runtime's container).
  std::set<pid_t> pids;
  for (const Hierarchy& h : hierarchies_) {
    for (const std::string& dir : Subtree(h, rank)) {
      std::istringstream in(ReadFile(dir + "/cgroup.procs"));
      pid_t pid;
      while (in >> pid) pids.insert(pid);
    }
  }
  return {pids.begin(), pids.end()};
}

void RankCgroups::Signal(const std::string& rank, int signal) const {
  for (pid_t pid : Processes(rank)) kill(pid, signal);
}

bool RankCgroups::Kill(const std::string& rank, absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    for (const Hierarchy& h : hierarchies_) {
      if (h.kill) WriteFile(Dir(h, rank) + "/cgroup.kill", "1");
      if (h.freezer) WriteFile(Dir(h, rank) + "/freezer.state", "FROZEN");
    }
    Signal(rank, SIGKILL);  // frozen processes die once thawed
    for (const Hierarchy& h : hierarchies_) {
      if (h.freezer) WriteFile(Dir(h, rank) + "/freezer.state", "THAWED");
    }
    if (Processes(rank).empty()) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

bool RankCgroups::RanOutOfMemory(const UniqueFd& oom_events) {
  if (!oom_events.valid()) return false;
  // Polled, not read: a second look sees it still.
  pollfd signalled{oom_events.get(), POLLIN, 0};
  return poll(&signalled, 1, 0) == 1;
}

bool RankCgroups::OomKilled(const std::string& rank) const {
  for (const Hierarchy& h : hierarchies_) {
    if (!h.memory) continue;
    // v2 counts a subtree's kills in its top's memory.events; v1 each
    // cgroup's own.
    const std::string file = h.v2 ? "/memory.events" : "/memory.oom_control";
    for (const std::string& dir : Subtree(h, rank)) {
      if (ReadKey(dir + file, "oom_kill") > 0) return true;
      if (h.v2) break;
    }
  }
  return false;
}

void RankCgroups::Remove(const std::string& rank) const {
  for (const Hierarchy& h : hierarchies_) {
    std::vector<std::string> dirs = Subtree(h, rank);
    for (auto dir = dirs.rbegin(); dir != dirs.rend(); ++dir) rmdir(dir->c_str());  // leaves first
  }
}

std::vector<std::string> RankCgroups::Existing() const {
  std::set<std::string> ranks;
  for (const Hierarchy& h : hierarchies_) {
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(h.dir, error)) {
      if (entry.is_directory()) ranks.insert(entry.path().filename().string());
    }
  }
  return {ranks.begin(), ranks.end()};
}

std::string RankCgroups::Describe() const {
  std::vector<std::string> dirs;
  for (const Hierarchy& h : hierarchies_) dirs.push_back(h.dir);
  return absl::StrJoin(dirs, ", ");
}

}  // namespace ringmaster
