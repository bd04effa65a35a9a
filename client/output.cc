#include "client/output.h"

#include <google/protobuf/util/json_util.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "domain/job_state.h"
#include "domain/lr_schedule.h"

namespace ringmaster {

void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

std::optional<OutputFormat> ParseOutputFormat(const std::string& name) {
  if (name == "table") return OutputFormat::kTable;
  if (name == "json") return OutputFormat::kJson;
  if (name == "yaml") return OutputFormat::kYaml;
  return std::nullopt;
}

namespace {

std::string Json(const google::protobuf::Message& message, bool indent) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = indent;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!indent) return json;
  // The printer ends an indented document with a newline; callers add theirs.
  while (!json.empty() && json.back() == '\n') json.pop_back();
  return json;
}

// Block style all the way down (JSON parses as flow style).
void MakeBlock(YAML::Node node) {
  if (node.IsMap() || node.IsSequence()) {
    node.SetStyle(YAML::EmitterStyle::Block);
    for (auto it = node.begin(); it != node.end(); ++it) {
      MakeBlock(node.IsMap() ? it->second : *it);
    }
  }
}

}  // namespace

std::string ToJson(const google::protobuf::Message& message) { return Json(message, true); }

std::string ToJsonLine(const google::protobuf::Message& message) { return Json(message, false); }

std::string ToYaml(const google::protobuf::Message& message) {
  YAML::Node node = YAML::Load(Json(message, false));  // JSON is YAML
  MakeBlock(node);
  YAML::Emitter out;
  out << node;
  return out.c_str();
}

std::string Render(const google::protobuf::Message& message, OutputFormat format, bool stream) {
  if (format == OutputFormat::kYaml) {
    return absl::StrCat(stream ? "---\n" : "", ToYaml(message), "\n");
  }
  return absl::StrCat(stream ? ToJsonLine(message) : ToJson(message), "\n");
}

std::string ShortDuration(absl::Duration d) {
  int64_t s = std::max<int64_t>(0, absl::ToInt64Seconds(d));
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, (s % 86400) / 3600);
}

std::string JobStateLabel(v1::JobState state) { return v1::JobState_Name(state); }

std::string ProgressLine(const v1::Progress& p) {
  if (p.step() == 0 && p.total_steps() == 0) return "";
  std::string line = absl::StrCat("step ", p.step());
  if (p.total_steps() > 0) absl::StrAppend(&line, "/", p.total_steps());
  absl::StrAppend(&line,
                  absl::StrFormat("  loss %.4f  %.0f samples/s", p.loss(), p.samples_per_second()));
  return line;
}

namespace {

std::string LastMessage(const v1::Job& job) {
  if (job.state() == v1::PENDING && !job.pending_reason().empty()) return job.pending_reason();
  if (job.state() == v1::STARTING && !job.pulling().empty()) return job.pulling();
  return job.history_size() > 0 ? job.history(job.history_size() - 1).message() : "";
}

// "a=1,b=2", or "-" for none.
std::string Labels(const google::protobuf::Map<std::string, std::string>& labels) {
  if (labels.empty()) return "-";
  std::map<std::string, std::string> sorted(labels.begin(), labels.end());
  return absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

// "high (1000)", or the number a spec gave.
std::string PriorityLabel(const v1::Job& job) {
  const std::string& named = job.spec().priority();
  if (named.empty() || named == absl::StrCat(job.priority())) return absl::StrCat(job.priority());
  return absl::StrCat(named, " (", job.priority(), ")");
}

std::string RankStateLabel(v1::RankState state) {
  std::string name = v1::RankState_Name(state);
  return name.substr(name.find('_') + 1);
}

}  // namespace

void PrintJobsTable(std::ostream& out, const std::vector<v1::Job>& jobs, absl::Time now) {
  std::vector<std::vector<std::string>> rows = {{"JOB", "OWNER", "QUEUE", "PRIORITY", "STATE",
                                                 "RANKS", "RESTARTS", "AGE", "PROGRESS",
                                                 "MESSAGE"}};
  for (const v1::Job& job : jobs) {
    std::string progress = ProgressLine(job.progress());
    rows.push_back({job.id(), job.owner(), job.spec().queue(), PriorityLabel(job),
                    JobStateLabel(job.state()), absl::StrCat(job.world_size()),
                    absl::StrCat(job.restarts()),
                    ShortDuration(now - absl::FromUnixMillis(job.create_unix_ms())),
                    progress.empty() ? "-" : progress, LastMessage(job)});
  }
  PrintTable(out, rows);
}

namespace {

// Where the ranks may go, what each takes, and when the job is restarted.
void PrintSpecTerms(std::ostream& out, const v1::JobSpec& spec) {
  if (!spec.labels().empty()) out << "labels:    " << Labels(spec.labels()) << "\n";
  std::vector<std::string> placement;
  if (!spec.worker_selector().empty()) {
    placement.push_back(absl::StrCat("workers with ", Labels(spec.worker_selector())));
  }
  if (spec.ranks_per_worker() > 0) {
    placement.push_back(absl::StrCat(spec.ranks_per_worker(), " ranks per worker"));
  }
  if (!spec.placement().pack().empty()) {
    placement.push_back(absl::StrCat("in one ", spec.placement().pack(),
                                     spec.placement().mode() == "preferred" ? " (preferred)" : ""));
  }
  if (!spec.placement().spread().empty()) {
    placement.push_back(absl::StrCat("one rank per ", spec.placement().spread()));
  }
  if (!placement.empty()) out << "placement: " << absl::StrJoin(placement, ", ") << "\n";
  const v1::Resources& resources = spec.resources();
  if (resources.cpus() > 0 || resources.memory_mb() > 0) {
    out << "per rank:  " << resources.cpus() << " CPUs, "
        << (resources.memory_mb() > 0 ? absl::StrCat(resources.memory_mb(), " MB")
                                      : "no memory limit")
        << "\n";
  }
  std::string policy = absl::StrCat(
      "restart ", spec.restart_policy().empty() ? "on_failure" : spec.restart_policy());
  if (!spec.never_retry_exit_codes().empty()) {
    absl::StrAppend(&policy, ", never after exit code ",
                    absl::StrJoin(spec.never_retry_exit_codes(), "/"));
  }
  if (spec.deadline_s() > 0) {
    absl::StrAppend(&policy, ", deadline ", ShortDuration(absl::Seconds(spec.deadline_s())));
  }
  out << "policy:    " << policy << "\n";
}

// The learning rate the ranks use, which lr_scaling multiplies by the
// world size, and when the trainer checkpoints.
void PrintTrainerTerms(std::ostream& out, const v1::Job& job) {
  const v1::TrainerSpec& t = job.spec().trainer();
  const int world = job.world_size() > 0 ? job.world_size() : job.spec().ranks();
  // The rate the ranks use, as the trainer computes it.
  const LrSchedule schedule{t.optimizer().lr(), t.lr_scaling(), world};
  std::string scaled;
  if (t.lr_scaling() == "linear") scaled = absl::StrCat(" x ", world, " ranks");
  if (t.lr_scaling() == "sqrt") scaled = absl::StrCat(" x sqrt(", world, " ranks)");
  out << "trainer:   " << t.optimizer().type() << ", learning rate "
      << absl::StrFormat("%g", schedule.Peak());
  if (!scaled.empty()) {
    out << absl::StrFormat(" (%g", t.optimizer().lr()) << scaled << ", lr_scaling "
        << t.lr_scaling() << ")";
  }
  std::vector<std::string> every;
  if (t.checkpoint_every_steps() > 0) {
    every.push_back(absl::StrCat(t.checkpoint_every_steps(), " steps"));
  }
  if (t.checkpoint_every_s() > 0) {
    every.push_back(ShortDuration(absl::Seconds(t.checkpoint_every_s())));
  }
  out << "; checkpoints "
      << (every.empty() ? "on stop only" : absl::StrCat("every ", absl::StrJoin(every, " or ")))
      << "\n";
}

void PrintRanks(std::ostream& out, const v1::Job& job) {
  if (job.ranks_size() == 0) return;
  out << "ranks:\n";
  std::vector<std::vector<std::string>> rows = {
      {"  RANK", "WORKER", "SLOT", "STATE", "PID", "EXIT"}};
  for (const v1::RankStatus& r : job.ranks()) {
    std::string exit = "-";
    if (r.state() == v1::RANK_SUCCEEDED || r.state() == v1::RANK_FAILED ||
        r.state() == v1::RANK_STOPPED) {
      exit =
          r.signal() ? absl::StrCat("signal ", r.signal()) : absl::StrCat("code ", r.exit_code());
    }
    std::string slot =
        r.gpus_size() ? absl::StrCat("gpu ", absl::StrJoin(r.gpus(), ",")) : absl::StrCat(r.slot());
    // A rank of a group that shrank: "FAILED, left (group 1)".
    std::string state = RankStateLabel(r.state());
    if (r.left_generation() > 0)
      absl::StrAppend(&state, ", left (group ", r.left_generation(), ")");
    rows.push_back({absl::StrCat("  ", r.rank()), r.worker_id(), slot, state,
                    r.pid() ? absl::StrCat(r.pid()) : "-", exit});
  }
  PrintTable(out, rows);
}

// "ValueError: bad input (rank 1 on worker w2, attempt 0)"
std::string RootCauseLine(const v1::Failure& f) {
  std::string line = f.error().empty() ? f.message() : f.error();
  if (f.rank() >= 0) {
    absl::StrAppend(&line, " (rank ", f.rank());
    if (!f.worker_id().empty()) absl::StrAppend(&line, " on worker ", f.worker_id());
    absl::StrAppend(&line, ", attempt ", f.attempt(), ")");
  }
  return line;
}

}  // namespace

void PrintStacks(std::ostream& out, const v1::StacksReport& report) {
  out << "stacks:    attempt " << report.attempt() << ", "
      << absl::FormatTime("%H:%M:%S", absl::FromUnixMillis(report.time_unix_ms()),
                          absl::LocalTimeZone())
      << " (" << report.why() << ")\n";
  if (!report.summary().empty()) out << "  " << report.summary() << "\n";
  for (const v1::RankStacks& r : report.ranks()) {
    out << "  rank " << r.rank() << " on " << r.worker_id() << ": " << r.summary() << "\n";
  }
}

// The latest pre-flight check: each rank's bus bandwidths, and why a
// worker was excluded.
void PrintPreflight(std::ostream& out, const v1::Job& job) {
  const v1::PreflightResult& result = job.preflight();
  if (result.ranks_size() == 0) {
    if (job.spec().preflight()) out << "preflight: on; no figures yet\n";
    return;
  }
  out << "preflight: attempt " << result.attempt() << ", "
      << (result.passed() ? "passed" : "workers excluded")
      << " (64 MB all-reduce; bus bandwidth with the rank's best peer, across the job)\n";
  for (const v1::PreflightRank& r : result.ranks()) {
    out << "  rank " << r.rank() << " on " << r.worker_id() << ": ";
    if (r.error().empty()) {
      out << absl::StrFormat("%.2f GB/s, %.2f GB/s", r.bus_gb_per_s(), r.world_gb_per_s());
    } else {
      out << "failed: " << r.error();
    }
    if (!r.excluded().empty()) out << "  EXCLUDED: " << r.excluded();
    out << "\n";
  }
}

// What its workers hold in memory for a restart, and where the latest
// restart resumed from.
void PrintRecovery(std::ostream& out, const v1::Job& job) {
  const v1::SnapshotState& s = job.snapshots();
  if (!s.off().empty()) {
    out << "snapshots: off (" << s.off() << "): restarts resume from disk\n";
  } else if (s.consistent_step() > 0) {
    out << absl::StrFormat("snapshots: step %d held in memory for every rank (%.1f MiB each)",
                           s.consistent_step(), s.bytes_per_rank() / 1048576.0);
    if (s.replica_step() > 0) out << "; replicas on peers: step " << s.replica_step();
    out << "\n";
  } else if (s.newest_step() > 0) {
    out << absl::StrFormat("snapshots: up to step %d, not yet held for every rank\n",
                           s.newest_step());
  }
  const v1::Goodput& g = job.goodput();
  if (g.wall_seconds() > 0) {
    // The causes that cost anything, largest first.
    std::vector<std::pair<double, std::string>> lost;
    for (const auto& [cause, seconds] : g.lost_seconds()) {
      if (seconds >= 0.05) lost.push_back({seconds, cause});
    }
    std::sort(lost.rbegin(), lost.rend());
    auto time = [](double seconds) {
      return seconds < 60 ? absl::StrFormat("%.1fs", seconds)
                          : ShortDuration(absl::Seconds(seconds));
    };
    std::vector<std::string> parts;
    for (const auto& [seconds, cause] : lost)
      parts.push_back(absl::StrCat(cause, " ", time(seconds)));
    out << absl::StrFormat("goodput:   %.3f (productive %s of %s", g.ratio(),
                           time(g.productive_seconds()), time(g.wall_seconds()))
        << (parts.empty() ? "" : absl::StrCat("; lost: ", absl::StrJoin(parts, ", "))) << ")\n";
  }
  if (!job.has_resumed()) return;
  const v1::ResumeRecord& r = job.resumed();
  out << "resumed:   attempt " << r.attempt();
  if (r.generation() > 0) {
    out << ", group " << r.generation() << " at step " << r.step() << " from "
        << (r.from() == "disk" ? "disk"
                               : "memory, the ranks that did not fail keeping their processes");
  } else {
    out << " at step " << r.step() << " from "
        << (r.from() == "memory"    ? "memory on its workers"
            : r.from() == "replica" ? "memory, with snapshots fetched from peers' replicas"
                                    : r.from());
  }
  if (r.seconds() > 0) {
    out << absl::StrFormat(", %d steps redone, first step %.1f s after the failure",
                           r.steps_redone(), r.seconds());
  }
  out << "\n";
}

void PrintJobDetail(std::ostream& out, const v1::Job& job, absl::Time now) {
  out << "job:       " << job.id() << "\n"
      << "owner:     " << job.owner() << "\n"
      << "queue:     " << job.spec().queue() << ", priority " << PriorityLabel(job)
      << (job.spec().preemptible()
              ? absl::StrCat(", preemptible (grace ",
                             ShortDuration(absl::Seconds(job.spec().preemption_grace_s())), ")")
              : ", not preemptible")
      << (job.preemptions() > 0 ? absl::StrCat("; preempted ", job.preemptions(), " times") : "")
      << "\n"
      << "state:     " << JobStateLabel(job.state()) << "\n";
  if (job.state() == v1::PENDING && !job.pending_reason().empty()) {
    out << "waiting:   " << job.pending_reason() << "\n";
  }
  if (job.state() == v1::STARTING && !job.pulling().empty()) {
    out << "image:     " << job.pulling() << "\n";
  }
  out << "attempt:   " << job.attempt() << " (" << job.restarts() << " of "
      << job.spec().max_restarts() << " restarts after failures)\n";
  if (job.world_size() != job.spec().ranks()) {
    out << "ranks:     " << job.world_size() << " of " << job.spec().ranks() << " (elastic, min "
        << job.spec().min_ranks() << ")\n";
  }
  out << "age:       " << ShortDuration(now - absl::FromUnixMillis(job.create_unix_ms())) << "\n";
  PrintSpecTerms(out, job.spec());
  if (job.spec().has_trainer()) PrintTrainerTerms(out, job);
  if (!job.master_addr().empty()) {
    out << "master:    " << job.master_addr() << ":" << job.master_port() << "\n";
  }
  // "placed:    rack r1 (4 ranks); host r1/a (2), r1/b (2)"
  std::vector<std::string> placed;
  for (const v1::PlacedDomains& level : job.placed_in()) {
    std::vector<std::string> domains;
    for (int i = 0; i < level.domains_size(); ++i) {
      domains.push_back(absl::StrCat(level.domains(i).empty() ? "(none)" : level.domains(i), " (",
                                     level.ranks(i), level.ranks(i) == 1 ? " rank)" : " ranks)"));
    }
    placed.push_back(absl::StrCat(level.level(), " ", absl::StrJoin(domains, ", ")));
  }
  if (!placed.empty()) out << "placed:    " << absl::StrJoin(placed, "; ") << "\n";
  const v1::Progress& p = job.progress();
  if (p.step() > 0) {
    out << absl::StrFormat("progress:  step %d/%d  epoch %d  loss %.4f  %.0f samples/s\n", p.step(),
                           p.total_steps(), p.epoch(), p.loss(), p.samples_per_second());
    if (p.allreduce_seconds() > 0) {
      out << absl::StrFormat("allreduce: %.1f MB in %.2f s (%.1f MB/s)\n",
                             p.allreduce_bytes() / 1e6, p.allreduce_seconds(),
                             p.allreduce_bytes() / 1e6 / p.allreduce_seconds());
    }
  }
  PrintRecovery(out, job);
  PrintRanks(out, job);
  PrintPreflight(out, job);
  for (const v1::Straggler& s : job.stragglers()) {
    out << "straggler: " << StragglerLine(s, now) << "\n";
  }
  for (const v1::ExcludedWorker& e : job.excluded_workers()) {
    out << "avoids:    " << e.worker_id() << " (" << e.reason() << ")\n";
  }
  if (job.stacks().ranks_size() > 0) PrintStacks(out, job.stacks());
  if (job.has_root_cause()) out << "root cause: " << RootCauseLine(job.root_cause()) << "\n";
  out << "history:\n";
  std::vector<std::vector<std::string>> rows;
  for (const v1::StateChange& c : job.history()) {
    rows.push_back(
        {absl::StrCat("  ", absl::FormatTime("%H:%M:%S", absl::FromUnixMillis(c.time_unix_ms()),
                                             absl::LocalTimeZone())),
         JobStateLabel(c.state()), v1::Reason_Name(c.reason()), c.message()});
  }
  PrintTable(out, rows);
}

namespace {

// "8 slots, 8 GPUs", "8 slots", "-" (no bound).
std::string Amount(const v1::SlotAmount& amount) {
  if (amount.slots() < 0 && amount.gpus() < 0) return "-";
  std::string text = amount.slots() < 0 ? "any slots" : absl::StrCat(amount.slots(), " slots");
  if (amount.gpus() != 0) {
    absl::StrAppend(&text, ", ", amount.gpus() < 0 ? "any" : absl::StrCat(amount.gpus()), " GPUs");
  }
  return text;
}

}  // namespace

void PrintQueuesTable(std::ostream& out, const v1::ListQueuesResponse& queues) {
  std::vector<std::vector<std::string>> rows = {
      {"QUEUE", "WEIGHT", "QUOTA", "LIMIT", "IN USE", "BORROWED", "RUNNING", "PENDING", "USERS"}};
  for (const v1::Queue& q : queues.queues()) {
    rows.push_back({q.is_default() ? q.name() + " (default)" : q.name(),
                    absl::StrFormat("%g", q.weight()), Amount(q.quota()), Amount(q.limit()),
                    Amount(q.in_use()), Amount(q.borrowed()), absl::StrCat(q.running_jobs()),
                    absl::StrCat(q.pending_jobs()),
                    q.users().empty() ? "anyone" : absl::StrJoin(q.users(), ",")});
  }
  PrintTable(out, rows);
  std::vector<std::pair<int, std::string>> classes;
  for (const auto& [name, priority] : queues.priority_classes())
    classes.push_back({priority, name});
  std::sort(classes.begin(), classes.end());
  std::vector<std::string> shown;
  for (const auto& [priority, name] : classes) shown.push_back(absl::StrCat(name, " ", priority));
  out << "priority classes: " << absl::StrJoin(shown, ", ") << "\n";
}

std::string WorkerSchedulingLabel(const v1::Worker& worker) {
  if (worker.health().has_cordon()) return "CORDONED";
  return worker.spare() ? "SPARE" : "SCHEDULABLE";
}

namespace {

// "rack=r1,host=node-3", in the order of the levels; "-" for none.
std::string TopologyOf(const v1::Worker& worker, const v1::ListWorkersResponse& workers) {
  std::vector<std::string> parts;
  for (const std::string& level : workers.topology_levels()) {
    auto it = worker.topology().find(level);
    if (it != worker.topology().end()) parts.push_back(absl::StrCat(level, "=", it->second));
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, ",");
}

}  // namespace

std::string CordonDetail(const v1::Worker& worker, absl::Time now) {
  const v1::WorkerHealth& health = worker.health();
  auto when = [](int64_t unix_ms) {
    return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixMillis(unix_ms),
                            absl::UTCTimeZone());
  };
  if (!health.has_cordon()) {
    const int64_t until = health.probation_until_unix_ms();
    return until > absl::ToUnixMillis(now) ? absl::StrCat("on probation until ", when(until)) : "";
  }
  const v1::Cordon& c = health.cordon();
  std::string text = absl::StrCat(
      c.drained() ? "drained" : "cordoned", " by ", c.by(), " since ", when(c.since_unix_ms()),
      " (", ShortDuration(now - absl::FromUnixMillis(c.since_unix_ms())), " ago)");
  if (c.until_unix_ms() > 0) absl::StrAppend(&text, " until ", when(c.until_unix_ms()));
  absl::StrAppend(&text, ": ", c.reason());
  return text;
}

void PrintWorkersTable(std::ostream& out, const v1::ListWorkersResponse& workers, absl::Time now) {
  const bool topology = !workers.topology_levels().empty();
  std::vector<std::vector<std::string>> rows = {{"WORKER", "STATE", "SCHEDULING", "ADDRESS",
                                                 "SLOTS", "GPUS", "CPUS", "MEMORY", "LABELS",
                                                 "HEARTBEAT", "WHY"}};
  if (topology) rows[0].insert(rows[0].begin() + 4, "TOPOLOGY");
  for (const v1::Worker& w : workers.workers()) {
    std::vector<std::string> why;
    if (!w.state_reason().empty()) why.push_back(w.state_reason());
    if (std::string cordon = CordonDetail(w, now); !cordon.empty()) why.push_back(cordon);
    rows.push_back({w.id(), WorkerStateName(w.state()), WorkerSchedulingLabel(w), w.address(),
                    absl::StrCat(w.slots_used(), "/", w.slots()), absl::StrCat(w.gpus_size()),
                    w.cpus() > 0 ? absl::StrCat(w.cpus()) : "-",
                    w.memory_mb() > 0 ? absl::StrFormat("%.1f GB", w.memory_mb() / 1024.0) : "-",
                    Labels(w.labels()), absl::StrFormat("%.1fs ago", w.heartbeat_age_seconds()),
                    why.empty() ? "-" : absl::StrJoin(why, "; ")});
    if (topology) rows.back().insert(rows.back().begin() + 4, TopologyOf(w, workers));
  }
  PrintTable(out, rows);
}

void PrintImagesTable(std::ostream& out, const std::vector<v1::Worker>& workers, absl::Time now) {
  std::vector<std::vector<std::string>> rows = {
      {"WORKER", "IMAGE", "DIGEST", "SIZE", "RANKS", "LAST USED"}};
  for (const v1::Worker& w : workers) {
    for (const v1::CachedImage& image : w.images()) {
      const absl::Time used = absl::FromUnixMillis(image.last_used_unix_ms());
      rows.push_back({w.id(), image.reference(), image.digest().substr(0, 19),
                      absl::StrFormat("%.1f MiB", image.bytes() / 1048576.0),
                      absl::StrCat(image.ranks()),
                      image.ranks() > 0 ? "in use" : ShortDuration(now - used) + " ago"});
    }
  }
  PrintTable(out, rows);
}

}  // namespace ringmaster
