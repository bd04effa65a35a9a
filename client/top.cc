#include "client/top.h"

#include <poll.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <iostream>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/output.h"
#include "domain/job_state.h"

namespace ringmaster {
namespace {

std::atomic<bool> stop_requested{false};

void OnStopSignal(int) { stop_requested = true; }

constexpr char kEnterScreen[] = "\x1b[?1049h\x1b[?25l";
constexpr char kLeaveScreen[] = "\x1b[?25h\x1b[?1049l";
constexpr char kHomeAndClear[] = "\x1b[H\x1b[2J";

std::string Gigabytes(double bytes) { return absl::StrFormat("%.1f", bytes / 1e9); }

// Terminal in non-canonical mode (a single 'q' is read), restored by the
// destructor.
class RawInput {
 public:
  RawInput() : active_(isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_) == 0) {
    if (!active_) return;
    termios raw = saved_;
    raw.c_lflag &= ~(ICANON | ECHO);
    tcsetattr(STDIN_FILENO, TCSANOW, &raw);
  }
  ~RawInput() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  // Waits up to `ms`; true when 'q' was typed.
  bool QuitWithin(int ms) {
    if (!active_) {
      usleep(ms * 1000);
      return false;
    }
    pollfd p{STDIN_FILENO, POLLIN, 0};
    if (poll(&p, 1, ms) > 0) {
      char c = 0;
      if (read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q')) return true;
    }
    return false;
  }

 private:
  termios saved_{};
  const bool active_;
};

}  // namespace

std::string TopView::Render(const std::vector<v1::Job>& jobs,
                            const std::vector<v1::Worker>& workers, absl::Time now) {
  std::string out = absl::StrFormat("ringmaster top — %s\n\n",
                                    absl::FormatTime("%H:%M:%S", now, absl::LocalTimeZone()));
  std::vector<std::vector<std::string>> rows = {{"JOB", "STATE", "RANKS", "STEP", "STEPS/S",
                                                 "SAMPLES/S", "LOSS", "ALLREDUCE GB/S (BUS)",
                                                 "GOODPUT", "STRAGGLERS"}};
  std::map<std::string, Last> seen;
  for (const v1::Job& job : jobs) {
    const v1::Progress& p = job.progress();
    std::string rate = "-";
    auto it = last_.find(job.id());
    if (it != last_.end() && now > it->second.at && p.step() >= it->second.step) {
      rate = absl::StrFormat(
          "%.1f", (p.step() - it->second.step) / absl::ToDoubleSeconds(now - it->second.at));
    }
    seen[job.id()] = {p.step(), now};
    std::string bandwidth = "-";
    if (p.allreduce_seconds() > 0) {
      const double algbw = p.allreduce_bytes() / p.allreduce_seconds();
      const int n = std::max(1, job.world_size());
      bandwidth = absl::StrCat(Gigabytes(algbw), " (", Gigabytes(algbw * 2.0 * (n - 1) / n), ")");
    }
    std::vector<std::string> stragglers;  // "rank 3 1.8×"
    for (const v1::Straggler& s : job.stragglers()) {
      stragglers.push_back(absl::StrFormat("rank %d %.1f×", s.rank(), s.ratio()));
    }
    rows.push_back(
        {job.id(), JobStateLabel(job.state()), absl::StrCat(job.world_size()),
         p.total_steps() > 0 ? absl::StrCat(p.step(), "/", p.total_steps()) : "-", rate,
         p.samples_per_second() > 0 ? absl::StrFormat("%.0f", p.samples_per_second()) : "-",
         p.step() > 0 ? absl::StrFormat("%.4f", p.loss()) : "-", bandwidth,
         job.goodput().wall_seconds() > 0 ? absl::StrFormat("%.3f", job.goodput().ratio()) : "-",
         stragglers.empty() ? "-" : absl::StrJoin(stragglers, ", ")});
  }
  last_ = std::move(seen);
  std::ostringstream table;
  PrintTable(table, rows);
  out += table.str();

  rows = {{"WORKER", "STATE", "SLOTS", "CPU", "GPU UTIL", "GPU MEMORY"}};
  for (const v1::Worker& w : workers) {
    std::string util = "-", memory = "-";
    if (w.gpu_usage_size() > 0) {
      util.clear();
      memory.clear();
      for (const v1::GpuUsage& g : w.gpu_usage()) {
        absl::StrAppend(&util, util.empty() ? "" : " ",
                        absl::StrFormat("%d:%.0f%%", g.index(), 100 * g.utilization_ratio()));
        absl::StrAppend(&memory, memory.empty() ? "" : " ",
                        absl::StrFormat("%d:%s/%sG", g.index(), Gigabytes(g.memory_used_bytes()),
                                        Gigabytes(g.memory_total_bytes())));
      }
    }
    rows.push_back(
        {w.id(),
         absl::StrCat(WorkerStateName(w.state()), w.health().has_cordon() ? " CORDONED" : ""),
         absl::StrCat(w.slots_used(), "/", w.slots()),
         absl::StrFormat("%.0f%%", 100 * w.cpu_utilization_ratio()), util, memory});
  }
  std::ostringstream workers_table;
  PrintTable(workers_table, rows);
  absl::StrAppend(&out, "\n", workers_table.str());
  return out;
}

namespace {

// The jobs a frame shows: the active ones, or the newest page of all.
absl::StatusOr<std::vector<v1::Job>> TopJobs(Client& client, bool all) {
  v1::ListJobsRequest request;
  if (!all) {
    for (v1::JobState s : {v1::PENDING, v1::STARTING, v1::RUNNING, v1::RESTARTING}) {
      request.add_states(s);
    }
  }
  std::vector<v1::Job> jobs;
  do {
    absl::StatusOr<v1::ListJobsResponse> page = client.ListJobsPage(request);
    if (!page.ok()) return page.status();
    for (v1::Job& job : *page->mutable_jobs()) jobs.push_back(std::move(job));
    request.set_page_token(page->next_page_token());
  } while (!all && !request.page_token().empty());
  return jobs;
}

// A frame for programs: {"jobs": [...], "workers": [...]}.
google::protobuf::Struct Frame(const std::vector<v1::Job>& jobs,
                               const std::vector<v1::Worker>& workers) {
  v1::ListJobsResponse job_list;
  for (const v1::Job& j : jobs) *job_list.add_jobs() = j;
  v1::ListWorkersResponse worker_list;
  for (const v1::Worker& w : workers) *worker_list.add_workers() = w;
  google::protobuf::Struct a, b, frame;
  (void)google::protobuf::util::JsonStringToMessage(ToJsonLine(job_list), &a);
  (void)google::protobuf::util::JsonStringToMessage(ToJsonLine(worker_list), &b);
  (*frame.mutable_fields())["jobs"] = a.fields().at("jobs");
  (*frame.mutable_fields())["workers"] = b.fields().at("workers");
  return frame;
}

}  // namespace

int RunTop(Client& client, const TopOptions& options) {
  const bool table = options.output == OutputFormat::kTable;
  const bool screen = table && isatty(STDOUT_FILENO);
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  RawInput input;
  if (screen) std::cout << kEnterScreen << std::flush;
  TopView view;
  int code = 0;
  for (int frame = 0; options.iterations <= 0 || frame < options.iterations; ++frame) {
    auto jobs = TopJobs(client, options.all);
    auto workers = client.ListWorkers();
    std::string text;
    if (!jobs.ok() || !workers.ok()) {
      const absl::Status& failed = !jobs.ok() ? jobs.status() : workers.status();
      if (!table) {
        std::cerr << "ringmaster: " << failed.message() << std::endl;
        return 1;
      }
      text = absl::StrCat("ringmaster: ", failed.message(), "\n");
      code = 1;
    } else if (!table) {
      text = Render(Frame(*jobs, *workers), options.output, /*stream=*/true);
      code = 0;
    } else {
      text = view.Render(*jobs, *workers, absl::Now());
      code = 0;
    }
    if (table) {
      std::cout << (screen ? kHomeAndClear : "") << text << (screen ? "\n(q to quit)" : "\n");
    } else {
      std::cout << text;
    }
    std::cout << std::flush;
    if (stop_requested || (options.iterations > 0 && frame + 1 == options.iterations)) break;
    bool quit = false;
    for (int i = 0; i < 10 && !quit && !stop_requested; ++i) quit = input.QuitWithin(100);
    if (quit || stop_requested) break;
  }
  if (screen) std::cout << kLeaveScreen << std::flush;
  return code;
}

}  // namespace ringmaster
