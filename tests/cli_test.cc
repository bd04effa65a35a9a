// The CLI as users and scripts run it, from the binary: global options
// anywhere on the line, table, JSON and YAML output, follow as JSON lines,
// --version, shell completion, top with and without finished jobs, logs by
// attempt, tailed and timestamped, and a clear error for a rank or an
// attempt a job does not have.
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "testing/status_matchers.h"
#include "tests/cluster_fixture.h"

namespace ringmaster {
namespace {

using google::protobuf::Struct;
using testing::CommandResult;

Struct ParseJson(const std::string& text) {
  Struct out;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text, &out).ok()) << text;
  return out;
}

// The id of job `index` of a listing ({"jobs": [...]}).
std::string JobIdAt(const Struct& listing, int index) {
  return listing.fields()
      .at("jobs")
      .list_value()
      .values(index)
      .struct_value()
      .fields()
      .at("id")
      .string_value();
}

std::string Ringmaster() { return testing::Runfile("client/ringmaster"); }

TEST(CliTest, VersionIsTheRepositorysVersion) {
  std::ifstream in(testing::Runfile("VERSION"));
  std::string version;
  in >> version;
  ASSERT_FALSE(version.empty());
  CommandResult r = testing::RunCommand({Ringmaster(), "--version"}, {});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "ringmaster " + version + "\n");
}

TEST(CliTest, UpWhoseCoordinatorCannotStartShowsTheEndOfItsLog) {
  // The port is taken: a listening socket of the test's.
  int port = 0;
  const int taken = testing::ListenOnLoopback(&port, 1);
  ASSERT_GE(taken, 0);
  const std::string state = testing::MakeTempDir("up-taken");
  std::vector<std::string> up = {Ringmaster(),
                                 "--coordinator",
                                 absl::StrCat("127.0.0.1:", port),
                                 "up",
                                 "--workers",
                                 "1",
                                 "--state-dir",
                                 state};
  // As root, ranks of a uid per job could not reach a state dir below root's home.
  if (geteuid() == 0) up.insert(up.end(), {"--rank-user", "root"});
  CommandResult r = testing::RunCommand(up, {});
  close(taken);
  testing::RunCommand({Ringmaster(), "down", "--state-dir", state}, {});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("the coordinator (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("exited during start-up; the end of " + state + "/logs/coordinator.log:\n"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("cannot listen on 127.0.0.1:"), std::string::npos) << r.err;
}

// The words the completion function offers for `line` (the last word is
// the one being completed), with the script loaded in `shell`.
std::string Complete(const std::string& shell, const std::string& line) {
  std::vector<std::string> words = absl::StrSplit(line, ' ');
  std::string array;
  for (const std::string& w : words) absl::StrAppend(&array, "'", w, "' ");
  // zsh runs bash functions through bashcompinit, in sh emulation: arrays
  // count from 0 there, as in bash.
  const std::string script = absl::StrCat(
      "source <(", Ringmaster(), " completion ", shell, ") && ",
      shell == "zsh" ? "setopt ksharrays && " : "", "COMP_WORDS=(", array,
      ") && COMP_CWORD=", words.size() - 1, " && _ringmaster && echo \"${COMPREPLY[@]}\"");
  CommandResult r = testing::RunCommand({shell, "-c", script}, {});
  EXPECT_EQ(r.exit_code, 0) << shell << ": " << r.err;
  return std::string(absl::StripAsciiWhitespace(r.out));
}

TEST(CliTest, CompletionKnowsVerbsOptionsAndFormats) {
  EXPECT_EQ(Complete("bash", "ringmaster jo"), "jobs");
  EXPECT_EQ(Complete("bash", "ringmaster jobs --st"), "--state");
  EXPECT_EQ(Complete("bash", "ringmaster top --a"), "--all");
  EXPECT_EQ(Complete("bash", "ringmaster logs j-1 -o "), "table json yaml");
  EXPECT_EQ(Complete("bash", "ringmaster completion "),
            "bash zsh --coordinator --token-file "
            "--tls-dir --insecure --cert --output -o");
  if (testing::RunCommand({"sh", "-c", "command -v zsh"}, {}).exit_code != 0) {
    GTEST_SKIP() << "zsh is not installed (./dev installs it)";
  }
  // zsh's compgen offers every candidate of the context and leaves the
  // matching of the prefix to zsh itself.
  const auto words = [](const std::string& list) {
    std::vector<std::string> v = absl::StrSplit(list, ' ');
    return std::set<std::string>(v.begin(), v.end());
  };
  const std::set<std::string> submit = words(Complete("zsh", "ringmaster submit --fol"));
  EXPECT_EQ(submit.count("--follow"), 1u);
  EXPECT_EQ(submit.count("workers"), 0u) << "after submit, its options";
  const std::set<std::string> verbs = words(Complete("zsh", "ringmaster wor"));
  EXPECT_EQ(verbs.count("workers"), 1u);
  EXPECT_EQ(verbs.count("--follow"), 0u);
}

class CliClusterTest : public ClusterTest {};

// `up` says where each daemon's /metrics is (free ports, as in D/cluster),
// and how later commands find a cluster in another state dir.
TEST_F(CliClusterTest, UpPrintsTheMetricsAddressesAndTheStateDir) {
  CommandResult again = Cli({"up", "--workers", "2", "--state-dir", state_dir_});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out.rfind("already running: coordinator " + address_, 0), 0u) << again.out;
  std::vector<std::string> metrics;
  for (const DaemonRecord& d : DaemonRecords()) metrics.push_back(d.metrics_address);
  ASSERT_EQ(metrics.size(), 3u);
  EXPECT_NE(again.out.find(absl::StrCat("metrics: coordinator ", metrics[0], ", workers ",
                                        metrics[1], " ", metrics[2], "\n")),
            std::string::npos)
      << again.out;
  EXPECT_NE(again.out.find("for later commands: export RINGMASTER_STATE_DIR=" + state_dir_),
            std::string::npos)
      << again.out;
  CommandResult json = Cli({"up", "--workers", "2", "--state-dir", state_dir_, "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const Struct up = ParseJson(json.out);
  ASSERT_EQ(up.fields().at("metrics").list_value().values_size(), 3);
  EXPECT_EQ(up.fields().at("metrics").list_value().values(0).string_value(), metrics[0]);
}

TEST_F(CliClusterTest, GlobalOptionsGoAnywhereInEveryFormat) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"-o", "json", "jobs"},
                                             {"jobs", "-o", "json"},
                                             {"jobs", "--output=json", "--limit", "5"}}) {
    CommandResult r = Cli(args);
    ASSERT_EQ(r.exit_code, 0) << absl::StrJoin(args, " ") << ": " << r.err;
    // No job yet: the list is there, empty, not left out.
    const Struct list = ParseJson(r.out);
    ASSERT_EQ(list.fields().count("jobs"), 1u) << r.out;
    EXPECT_EQ(list.fields().at("jobs").list_value().values_size(), 0);
  }
  CommandResult json = Cli({"--output", "json", "workers"});
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"workers\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"id\": \"local-0\""), std::string::npos) << json.out;
  CommandResult yaml = Cli({"workers", "-o", "yaml", "--coordinator", address_});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  EXPECT_EQ(yaml.out.rfind("workers:\n", 0), 0u) << yaml.out;
  EXPECT_NE(yaml.out.find("- id: local-0\n"), std::string::npos) << yaml.out;
  EXPECT_NE(yaml.out.find("    state: WORKER_STATE_ALIVE\n"), std::string::npos) << yaml.out;
  CommandResult bad = Cli({"workers", "-o", "xml"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("xml"), std::string::npos) << bad.err;
}

TEST_F(CliClusterTest, JsonHasEveryFieldAndFollowPrintsOneObjectPerLine) {
  CommandResult follow = Cli({"submit", WriteSpec("ok", "name: ok\nranks: 1\ncommand: [true]\n"),
                              "--follow", "-o", "json"});
  ASSERT_EQ(follow.exit_code, 0) << follow.err;
  std::vector<std::string> lines = absl::StrSplit(follow.out, '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 2u) << follow.out;
  std::string id;
  for (const std::string& line : lines) {
    const Struct job = ParseJson(line);  // each line a whole object: no bare id
    if (id.empty()) id = job.fields().at("id").string_value();
    EXPECT_EQ(job.fields().at("id").string_value(), id);
  }
  EXPECT_EQ(ParseJson(lines.back()).fields().at("state").string_value(), "SUCCEEDED");

  CommandResult status = Cli({"status", id, "-o", "json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  const Struct job = ParseJson(status.out);
  const auto& rank0 = job.fields().at("ranks").list_value().values(0).struct_value().fields();
  EXPECT_EQ(rank0.at("rank").number_value(), 0) << "rank 0 has its rank";
  EXPECT_EQ(rank0.at("exit_code").number_value(), 0) << "exit code 0 is there";
  EXPECT_EQ(job.fields().at("restarts").number_value(), 0);

  CommandResult yaml = Cli({"-o", "yaml", "status", id});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  EXPECT_NE(yaml.out.find("\nstate: SUCCEEDED\n"), std::string::npos) << yaml.out;
  EXPECT_NE(yaml.out.find("    exit_code: 0\n"), std::string::npos) << yaml.out;
}

TEST_F(CliClusterTest, LogsOfARankTheJobDoesNotHaveIsAnError) {
  const std::string id = Submit("name: two\nranks: 2\ncommand: [echo, hi]\n");
  WaitJob(id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  CommandResult ok = Cli({"logs", id, "--rank", "1"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out, "[rank 1] hi\n");
  CommandResult json = Cli({"logs", id, "-o", "json"});
  EXPECT_EQ(json.exit_code, 0) << json.err;
  std::vector<std::string> lines = absl::StrSplit(json.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << json.out;
  std::set<double> ranks;
  for (const std::string& line : lines) {
    const Struct object = ParseJson(line);
    EXPECT_EQ(object.fields().at("line").string_value(), "hi");
    ranks.insert(object.fields().at("rank").number_value());
  }
  EXPECT_EQ(ranks, (std::set<double>{0, 1}));
  CommandResult missing = Cli({"logs", id, "--rank", "5"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.out, "");
  EXPECT_EQ(missing.err, "ringmaster: job " + id + " has no rank 5: its ranks are 0..1\n");
}

// Bad usage is the client's own finding (2); whatever the coordinator
// refuses is a refused request (1), INVALID_ARGUMENT included.
TEST_F(CliClusterTest, AnInvalidSpecIsBadUsageAndARefusalIsAFailure) {
  CommandResult invalid =
      Cli({"submit", WriteSpec("bad", "name: bad\nranks: 0\ncommand: [\"true\"]\n")});
  EXPECT_EQ(invalid.exit_code, 2);
  EXPECT_NE(invalid.err.find("ranks: must be in [1, 4096], got 0"), std::string::npos)
      << invalid.err;
  EXPECT_EQ(invalid.err.find("uploaded"), std::string::npos) << "code shipped for it";
  CommandResult refused = Cli({"status", "Not_An_Id"});
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_NE(refused.err.find("Not_An_Id"), std::string::npos) << refused.err;
}

// Each attempt's output apart: by default the latest attempt's, the
// first one's with --attempt 0, the last lines of either with --tail, each
// line's time with --timestamps; an attempt the job never had is an error.
TEST_F(CliClusterTest, LogsTellAttemptsApartTailAndTimestampThem) {
  const absl::Time before = absl::Now();
  const std::string id = Submit(
      "name: again\nranks: 1\nmax_restarts: 1\n"
      "command: [sh, -c, 'for i in 1 2 3 4; do echo attempt $TORCHELASTIC_RESTART_COUNT line $i; "
      "done; [ $TORCHELASTIC_RESTART_COUNT = 1 ]']\n");
  WaitJob(id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  auto lines = [](int attempt, int from) {
    std::string out;
    for (int i = from; i <= 4; ++i) {
      absl::StrAppend(&out, "[rank 0] attempt ", attempt, " line ", i, "\n");
    }
    return out;
  };
  CommandResult latest = Cli({"logs", id});
  EXPECT_EQ(latest.exit_code, 0) << latest.err;
  EXPECT_EQ(latest.out, lines(1, 1));
  CommandResult first = Cli({"logs", id, "--attempt", "0"});
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, lines(0, 1));
  CommandResult tail = Cli({"logs", id, "--attempt", "0", "--tail", "2"});
  EXPECT_EQ(tail.exit_code, 0) << tail.err;
  EXPECT_EQ(tail.out, lines(0, 3));

  CommandResult timed = Cli({"logs", id, "--tail", "1", "--timestamps", "-o", "json"});
  ASSERT_EQ(timed.exit_code, 0) << timed.err;
  const Struct line = ParseJson(timed.out);
  EXPECT_EQ(line.fields().at("line").string_value(), "attempt 1 line 4");
  EXPECT_EQ(line.fields().at("attempt").number_value(), 1);
  absl::Time time;
  std::string error;
  ASSERT_TRUE(
      absl::ParseTime(absl::RFC3339_full, line.fields().at("time").string_value(), &time, &error))
      << timed.out;
  EXPECT_GE(time, before);
  EXPECT_LE(time, absl::Now());
  CommandResult table = Cli({"logs", id, "--tail", "1", "--timestamps"});
  EXPECT_EQ(table.out,
            "[rank 0] " + line.fields().at("time").string_value() + " attempt 1 line 4\n");

  CommandResult missing = Cli({"logs", id, "--attempt", "2"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.out, "");
  EXPECT_EQ(missing.err, "ringmaster: job " + id + " has no attempt 2: its attempts are 0..1\n");
  CommandResult negative = Cli({"logs", id, "--tail", "-3"});
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_NE(negative.err.find("--tail"), std::string::npos) << negative.err;
}

// Following a job from its first attempt on goes through its restart,
// saying where the next attempt begins.
TEST_F(CliClusterTest, LogsFollowAJobThroughItsRestarts) {
  const std::string id = Submit(
      "name: follow\nranks: 1\nmax_restarts: 1\n"
      "command: [sh, -c, 'echo attempt $TORCHELASTIC_RESTART_COUNT; "
      "[ $TORCHELASTIC_RESTART_COUNT = 1 ] || { sleep 2; exit 3; }']\n");
  WaitJob(id, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  CommandResult follow = Cli({"logs", id, "--follow"});
  EXPECT_EQ(follow.exit_code, 0) << follow.err;
  EXPECT_EQ(follow.out, "[rank 0] attempt 0\n--- attempt 1 ---\n[rank 0] attempt 1\n");
  EXPECT_EQ(client_->GetJob(id)->state(), v1::SUCCEEDED);
}

TEST_F(CliClusterTest, TopHidesFinishedJobsUnlessAll) {
  const std::string done = Submit("name: done\nranks: 1\ncommand: [true]\n");
  WaitJob(done, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  const std::string running = Submit("name: running\nranks: 1\ncommand: [sleep, '600']\n");
  WaitJob(running, [](const v1::Job& j) { return j.state() == v1::RUNNING; });

  CommandResult top = Cli({"top", "--iterations", "1"});
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.out.find(running), std::string::npos) << top.out;
  EXPECT_EQ(top.out.find(done), std::string::npos) << top.out;
  CommandResult all = Cli({"top", "--all", "--iterations", "1"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_NE(all.out.find(running), std::string::npos) << all.out;
  EXPECT_NE(all.out.find(done), std::string::npos) << all.out;

  CommandResult json = Cli({"top", "--iterations", "2", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  std::vector<std::string> frames = absl::StrSplit(json.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(frames.size(), 2u) << json.out;
  const Struct frame = ParseJson(frames[0]);
  ASSERT_EQ(frame.fields().at("jobs").list_value().values_size(), 1);
  EXPECT_EQ(JobIdAt(frame, 0), running);
  EXPECT_EQ(frame.fields().at("workers").list_value().values_size(), 2);
  ASSERT_OK(client_->CancelJob(running));
}

TEST_F(CliClusterTest, LabelsRequestIdsAndPlacementFromTheCommandLine) {
  const std::string spec =
      "name: labelled\nranks: 1\ncommand: [true]\nlabels: {team: a}\ndeadline_s: 3600\n"
      "restart_policy: never\nresources: {cpus: 1}\n";
  CommandResult first = Cli({"submit", WriteSpec("a", spec), "--request-id", "retry-7"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string id = std::string(absl::StripAsciiWhitespace(first.out));
  CommandResult again = Cli({"submit", WriteSpec("a", spec), "--request-id", "retry-7"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(absl::StripAsciiWhitespace(again.out), id) << "the retry is the same job";
  CommandResult other = Cli({"submit", WriteSpec("b", "name: other\nranks: 1\ncommand: [true]\n"),
                             "--request-id", "retry-7"});
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.err.find("request_id \"retry-7\" was used for job " + id), std::string::npos)
      << other.err;
  const std::string b = Submit("name: unlabelled\nranks: 1\ncommand: [true]\nlabels: {team: b}\n");

  CommandResult team_a = Cli({"jobs", "-l", "team=a", "-o", "json"});
  ASSERT_EQ(team_a.exit_code, 0) << team_a.err;
  const Struct listed = ParseJson(team_a.out);
  ASSERT_EQ(listed.fields().at("jobs").list_value().values_size(), 1) << team_a.out;
  EXPECT_EQ(JobIdAt(listed, 0), id);
  CommandResult table = Cli({"jobs", "--label", "team=b"});
  EXPECT_NE(table.out.find(b), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find(id), std::string::npos) << table.out;
  CommandResult bad = Cli({"jobs", "-l", "team"});
  EXPECT_EQ(bad.exit_code, 2) << "bad usage";
  EXPECT_NE(bad.err.find("label \"team\" is not key=value"), std::string::npos) << bad.err;

  CommandResult status = Cli({"status", id});
  EXPECT_NE(status.out.find("labels:    team=a"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("policy:    restart never, deadline 1h"), std::string::npos)
      << status.out;
  CommandResult workers = Cli({"workers"});
  EXPECT_NE(workers.out.find("CPUS"), std::string::npos) << workers.out;
}

}  // namespace
}  // namespace ringmaster
