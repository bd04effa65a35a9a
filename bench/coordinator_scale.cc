// The coordinator at scale: this process runs the coordinator (the same
// CoordinatorServer as ringmaster-coordinator) over a job store holding
// --history ended jobs; a child process runs --workers simulated workers,
// each on a real Connect stream heartbeating every second, submits jobs at
// --rate per second (each placed on the workers, started, and succeeding
// after --rank-seconds) and lists the first page of jobs every second.
// The child measures latencies as a client sees them; this process
// measures its own CPU (getrusage) and memory (VmRSS, VmHWM), which is the
// coordinator's alone. Prints the figures beside the goals.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "bench/bench_load.h"
#include "bench/scheduling_load.h"
#include "bench/sim_workers.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/api/coordinator_server.h"
#include "coordinator/core/job_store.h"

namespace ringmaster {
namespace {

struct Options {
  int workers = 2000;
  int history = 200000;
  double rate = 100;
  int submit_seconds = 30;
  int steady_seconds = 10;
  int rank_seconds = 3;
  std::string state_dir;
  int queues = 50;
  int pending = 10000;
  bool scheduling_only = false;
  int rack_size = 20;  // --scheduling-only's topology run: workers per rack
};

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec +
         usage.ru_stime.tv_usec / 1e6;
}

// A field of /proc/self/status, in MiB.
double StatusMiB(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::stod(line.substr(field.size() + 1)) / 1024.0;  // kB
    }
  }
  return 0;
}

// Writes one line to the parent.
void Say(int report, const std::string& line) {
  const std::string text = line + "\n";
  if (write(report, text.data(), text.size()) < 0) _exit(1);
}

// Blocks until the parent writes the coordinator's port; 0 when it closed
// the pipe instead.
int ReadPort(int in) {
  int port = 0;
  return read(in, &port, sizeof(port)) == sizeof(port) ? port : 0;
}

// A child: the simulated workers, from the port's arrival until the pipe
// closes; then their counters.
[[noreturn]] void RunFleet(const Options& options, int in, int report) {
  const int port = ReadPort(in);
  if (port == 0) _exit(1);
  {
    FleetOptions fleet_options;
    fleet_options.target = absl::StrCat("127.0.0.1:", port);
    fleet_options.workers = options.workers;
    fleet_options.rank_runtime = absl::Seconds(options.rank_seconds);
    const absl::Time start = absl::Now();
    SimFleet fleet(fleet_options);
    if (!fleet.WaitRegistered(absl::Minutes(5))) {
      Say(report, "error the simulated workers did not all register");
      _exit(1);
    }
    Say(report, absl::StrCat("registered ", absl::ToDoubleSeconds(absl::Now() - start)));
    ReadPort(in);  // until the parent closes the pipe
    const FleetCounters& counters = fleet.counters();
    Say(report, absl::StrCat("result ranks_started ", counters.ranks_started.load()));
    Say(report, absl::StrCat("result ranks_exited ", counters.ranks_exited.load()));
    Say(report, absl::StrCat("result heartbeats ", counters.heartbeats.load()));
    Say(report, absl::StrCat("result streams_failed ", counters.streams_failed.load()));
  }
  Say(report, "fleet-done");
  _exit(0);
}

// A child: the submits and lists, a process of their own so that their
// latencies are not those of the simulated workers' threads.
[[noreturn]] void RunClient(const Options& options, int in, int report) {
  const int port = ReadPort(in);
  if (port == 0) _exit(1);
  LoadResult load = RunSubmitsAndLists(absl::StrCat("127.0.0.1:", port), options.rate,
                                       absl::Seconds(options.submit_seconds));
  Say(report, "load-end");
  for (const std::string& line : load.Lines()) Say(report, line);
  _exit(0);
}

struct Window {
  double wall = 0;
  double cpu = 0;
  double cores() const { return wall > 0 ? cpu / wall : 0; }
};

// Reads the children's lines until `until` (or the end): their figures,
// and errors.
void ReadReports(FILE* report, const std::string& until, std::map<std::string, double>* results) {
  char buffer[512];
  while (std::fgets(buffer, sizeof(buffer), report) != nullptr) {
    std::vector<std::string> words =
        absl::StrSplit(absl::StripTrailingAsciiWhitespace(buffer), ' ');
    if (words[0] == "registered") {
      (*results)["register_seconds"] = std::stod(words[1]);
    } else if (words[0] == "result" && words.size() == 3) {
      (*results)[words[1]] = std::stod(words[2]);
    } else if (words[0] == "error") {
      std::printf("%s", buffer);
    }
    if (words[0] == until) return;
  }
}

// This process's CPU and wall time since the last call.
class CpuMeter {
 public:
  Window Next() {
    const absl::Time now = absl::Now();
    const double cpu = CpuSeconds();
    const Window window{absl::ToDoubleSeconds(now - mark_), cpu - cpu_mark_};
    mark_ = now;
    cpu_mark_ = cpu;
    return window;
  }

 private:
  absl::Time mark_ = absl::Now();
  double cpu_mark_ = CpuSeconds();
};

void PrintReport(const Options& options, double recover_seconds, double rss_start, double rss_end,
                 double rss_peak, const std::map<std::string, Window>& windows,
                 std::map<std::string, double> r) {
  const Window& beats = windows.at("heartbeats");
  const Window& load = windows.at("load");
  std::printf("coordinator start with the history: %.2f s, RSS %.0f MiB\n", recover_seconds,
              rss_start);
  std::printf(
      "%d simulated workers registered in %.1f s; %.0f heartbeats, %.0f ranks started, "
      "%.0f exited, %.0f streams failed\n",
      options.workers, r["register_seconds"], r["heartbeats"], r["ranks_started"],
      r["ranks_exited"], r["streams_failed"]);
  std::printf("%.0f jobs submitted at %.0f/s (%.0f failed), %.0f first pages listed\n\n",
              r["submits"], options.rate, r["submit_errors"], r["lists"]);
  std::printf("%-44s %12s %10s\n", "", "measured", "goal");
  std::printf("%-44s %9.2f ms %10s\n", "submit latency p50", r["submit_p50_ms"], "");
  std::printf("%-44s %9.2f ms %10s\n", "submit latency p99", r["submit_p99_ms"], "< 10 ms");
  std::printf("%-44s %9.2f ms %10s\n", "ListJobs first page (50 jobs) p50", r["list_p50_ms"], "");
  std::printf("%-44s %9.2f ms %10s\n", "ListJobs first page (50 jobs) p99", r["list_p99_ms"],
              "< 20 ms");
  std::printf("%-44s %7.3f cores %10s\n", "coordinator CPU, heartbeats only", beats.cores(),
              "< 1 core");
  std::printf("%-44s %7.3f cores %10s\n", "coordinator CPU, heartbeats + submits + lists",
              load.cores(), "< 1 core");
  std::printf("%-44s %8.0f MiB %10s\n", "coordinator RSS at the end", rss_end, "");
  std::printf("%-44s %8.0f MiB %10s\n", "coordinator peak RSS", rss_peak, "< 1 GiB");
}

// The scheduler with a deep queue over many queues, in this process,
// beside the same load in the one default queue (no --queues).
int RunScheduling(const Options& options) {
  SchedulingLoadOptions load;
  load.state_dir = options.state_dir;
  load.workers = options.workers;
  load.queues = options.queues;
  load.pending = options.pending;
  absl::StatusOr<SchedulingLoadResult> queues = RunSchedulingLoad(load);
  load.queues = 1;
  load.state_dir = options.state_dir + "/one-queue";
  std::filesystem::create_directories(load.state_dir);
  absl::StatusOr<SchedulingLoadResult> one = queues.ok() ? RunSchedulingLoad(load) : queues;
  // The many queues again, the workers in racks, half the jobs packed.
  load.queues = options.queues;
  load.rack_size = options.rack_size;
  load.state_dir = options.state_dir + "/topology";
  std::filesystem::create_directories(load.state_dir);
  absl::StatusOr<SchedulingLoadResult> racks = one.ok() ? RunSchedulingLoad(load) : one;
  if (!racks.ok()) {
    std::printf("error: %s\n", racks.status().ToString().c_str());
    return 1;
  }
  const SchedulingLoadResult& r = *queues;
  std::printf("\nscheduling, in process: %d jobs running on %d workers of %d slots, %d pending\n",
              r.running_jobs, load.workers, load.slots_per_worker, r.pending_jobs);
  std::printf(
      "topology: --topology-levels rack,host, racks of %d workers, half the pending jobs "
      "with placement.pack: rack (%d running, %d pending)\n",
      options.rack_size, racks->running_jobs, racks->pending_jobs);
  const std::string many = absl::StrCat(options.queues, " queues");
  const std::string topology = absl::StrCat(options.queues, " q., racks");
  std::printf("%-36s %12s %12s %12s %10s\n", "", many.c_str(), "one queue", topology.c_str(),
              "goal");
  auto row = [](const char* what, double a, double b, double c, const char* goal) {
    std::printf("%-36s %9.2f ms %9.2f ms %9.2f ms %10s\n", what, a, b, c, goal);
  };
  row("submit with the queue deep, p50", r.submit_p50_ms, one->submit_p50_ms, racks->submit_p50_ms,
      "");
  row("submit with the queue deep, p99", r.submit_p99_ms, one->submit_p99_ms, racks->submit_p99_ms,
      "< 10 ms");
  row("scheduling tick p50", r.tick_p50_ms, one->tick_p50_ms, racks->tick_p50_ms, "");
  row("scheduling tick p99", r.tick_p99_ms, one->tick_p99_ms, racks->tick_p99_ms, "< 10 ms");
  row("scheduling tick max", r.tick_max_ms, one->tick_max_ms, racks->tick_max_ms, "");
  return 0;
}

// The two children, forked before this process starts any gRPC thread.
struct Children {
  pid_t fleet = 0;
  pid_t client = 0;
  int fleet_port = -1;   // write the port to start; close to stop
  int client_port = -1;  // write the port to start
  FILE* report = nullptr;

  bool Start(const Options& options) {
    int fleet_pipe[2], client_pipe[2], report_pipe[2];
    if (pipe(fleet_pipe) != 0 || pipe(client_pipe) != 0 || pipe(report_pipe) != 0) return false;
    fleet = fork();
    if (fleet == 0) {
      close(fleet_pipe[1]);
      close(client_pipe[1]);
      close(report_pipe[0]);
      RunFleet(options, fleet_pipe[0], report_pipe[1]);
    }
    client = fork();
    if (client == 0) {
      close(fleet_pipe[1]);
      close(client_pipe[1]);
      close(report_pipe[0]);
      RunClient(options, client_pipe[0], report_pipe[1]);
    }
    close(fleet_pipe[0]);
    close(client_pipe[0]);
    close(report_pipe[1]);
    fleet_port = fleet_pipe[1];
    client_port = client_pipe[1];
    report = fdopen(report_pipe[0], "r");
    return fleet > 0 && client > 0;
  }
  // True when both exited with 0.
  bool Wait() {
    bool ok = true;
    for (pid_t pid : {fleet, client}) {
      int status = 0;
      ok = waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0 && ok;
    }
    return ok;
  }
};

// Writes the history, then starts the coordinator over it; *start_seconds:
// how long the start took (the history's recovery included).
absl::StatusOr<std::unique_ptr<CoordinatorServer>> StartCoordinator(const Options& options,
                                                                    double* start_seconds) {
  const std::string db = options.state_dir + "/coordinator.db";
  ASSIGN_OR_RETURN(HistoryStats history, WriteHistory(db, options.history));
  std::printf("history: %d ended jobs, %.0f bytes each on average, written in %.1f s\n",
              options.history, history.mean_job_bytes, history.seconds);
  CoordinatorConfig config;
  config.listen_address = "127.0.0.1:0";
  config.metrics_address = "";
  config.state_dir = options.state_dir;
  config.manager.retain_finished_jobs = options.history * 2;
  config.manager.retain_finished = absl::Hours(24 * 365);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server = CoordinatorServer::Start(config);
  *start_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return server;
}

int Run(const Options& options) {
  Children children;
  if (!children.Start(options)) return 1;
  // The coordinator logs each transition as it does in service; to a file,
  // so that the figures stay readable.
  const std::string log = options.state_dir + ".log";
  if (std::freopen(log.c_str(), "w", stderr) == nullptr) return 1;
  InitLogging("coordinator", "info");
  std::printf("coordinator log: %s\n", log.c_str());
  double recover_seconds = 0;
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      StartCoordinator(options, &recover_seconds);
  if (!server.ok()) {
    std::printf("error: %s\n", server.status().ToString().c_str());
    return 1;
  }
  const double rss_at_start = StatusMiB("VmRSS");
  const int port = (*server)->port();

  std::map<std::string, double> results;
  std::map<std::string, Window> windows;
  CpuMeter meter;
  if (write(children.fleet_port, &port, sizeof(port)) != sizeof(port)) return 1;
  ReadReports(children.report, "registered", &results);
  windows["registering"] = meter.Next();
  absl::SleepFor(absl::Seconds(options.steady_seconds));
  windows["heartbeats"] = meter.Next();
  if (write(children.client_port, &port, sizeof(port)) != sizeof(port)) return 1;
  ReadReports(children.report, "load-end", &results);
  windows["load"] = meter.Next();
  close(children.fleet_port);
  ReadReports(children.report, "", &results);  // to the end
  const bool children_ok = children.Wait();
  const double rss_end = StatusMiB("VmRSS");
  const double rss_peak = StatusMiB("VmHWM");
  (*server)->Shutdown();
  if (!children_ok || windows["load"].wall == 0) {
    std::printf("error: a load process failed\n");
    return 1;
  }
  PrintReport(options, recover_seconds, rss_at_start, rss_end, rss_peak, windows, results);
  return RunScheduling(options);
}

}  // namespace
}  // namespace ringmaster

int main(int argc, char** argv) {
  ringmaster::Options options;
  CLI::App app{"The coordinator with thousands of workers and a long history"};
  app.add_option("--workers", options.workers, "simulated workers");
  app.add_option("--history", options.history, "ended jobs in the store at start");
  app.add_option("--rate", options.rate, "submits per second");
  app.add_option("--submit-seconds", options.submit_seconds, "how long to submit");
  app.add_option("--steady-seconds", options.steady_seconds, "heartbeats alone, measured");
  app.add_option("--rank-seconds", options.rank_seconds, "how long each simulated rank runs");
  app.add_option("--state-dir", options.state_dir, "empty: a new temporary directory");
  app.add_option("--queues", options.queues, "queues of the scheduling run");
  app.add_option("--pending", options.pending, "jobs left pending in the scheduling run");
  app.add_flag("--scheduling-only", options.scheduling_only,
               "only the scheduling run (in process, no gRPC)");
  app.add_option("--rack-size", options.rack_size,
                 "the scheduling run with topology: workers per rack")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (options.state_dir.empty()) {
    char dir[] = "/tmp/coordinator-scale-XXXXXX";
    if (mkdtemp(dir) == nullptr) return 1;
    options.state_dir = dir;
  }
  const int rc =
      options.scheduling_only ? ringmaster::RunScheduling(options) : ringmaster::Run(options);
  std::filesystem::remove_all(options.state_dir);
  return rc;
}
