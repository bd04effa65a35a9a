#include "worker/stack_capture.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "common/subprocess.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

// A Python process as a rank runs it: the ringmaster package's directory on
// its PYTHONPATH, a sleeping main thread and a second thread.
class PythonRank {
 public:
  PythonRank() : dir_(testing::MakeTempDir("stacks")) {
    std::ofstream(dir_ + "/sleeper.py") << "import threading, time\n"
                                           "def spin():\n"
                                           "    while True:\n"
                                           "        time.sleep(0.01)\n"
                                           "def sleep_forever():\n"
                                           "    time.sleep(3600)\n"
                                           "threading.Thread(target=spin, daemon=True).start()\n"
                                           "print('ready', flush=True)\n"
                                           "sleep_forever()\n";
    SubprocessSpec spec;
    spec.argv = {"/usr/bin/python3", dir_ + "/sleeper.py"};
    spec.env = CurrentEnvironment();
    spec.env["PYTHONPATH"] = testing::Runfile("python/sitecustomize.py")
                                 .substr(0, testing::Runfile("python/sitecustomize.py").rfind('/'));
    spec.env["RINGMASTER_STACKS_FILE"] = stacks();
    spec.output_path = dir_ + "/out";
    absl::StatusOr<pid_t> pid = SpawnProcess(spec);
    EXPECT_OK(pid);
    pid_ = pid.value_or(-1);
  }
  ~PythonRank() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }
  std::string dir() const { return dir_; }
  std::string stacks() const { return dir_ + "/stacks"; }
  // Once its sitecustomize has registered the signal and the script sleeps.
  bool Ready() {
    return testing::WaitFor(
        [&] {
          std::ifstream out(dir_ + "/out");
          const std::string said((std::istreambuf_iterator<char>(out)), {});
          return said.find("ready") != std::string::npos &&
                 CatchesSignal(pid_, PythonStacksSignal());
        },
        absl::Seconds(20));
  }

 private:
  const std::string dir_;
  pid_t pid_ = -1;
};

TEST(StackCaptureTest, APythonRankWritesEveryThreadsStackAndStaysAlive) {
  PythonRank rank;
  ASSERT_TRUE(rank.Ready()) << "sitecustomize did not register SIGRTMIN+5";
  StackCaptureOptions options;
  options.rank_dir = rank.dir();
  const RankStackCapture capture = CaptureStacks(rank.pid(), options);
  EXPECT_EQ(ProcessStateName(capture.state), "sleeping");
  EXPECT_NE(capture.python.find("line 6 in sleep_forever"), std::string::npos) << capture.python;
  EXPECT_NE(capture.python.find("in spin"), std::string::npos)
      << "every thread: " << capture.python;
  EXPECT_NE(capture.native.find("TID "), std::string::npos) << capture.native;
  EXPECT_EQ(waitpid(rank.pid(), nullptr, WNOHANG), 0) << "the rank lives on";
  // A second capture reads only what the second dump wrote.
  const RankStackCapture again = CaptureStacks(rank.pid(), options);
  EXPECT_EQ(again.python.find("Current thread"), again.python.rfind("Current thread"))
      << again.python;
}

TEST(StackCaptureTest, AStoppedRankHasNativeStacksOnly) {
  PythonRank rank;
  ASSERT_TRUE(rank.Ready());
  ASSERT_EQ(kill(rank.pid(), SIGSTOP), 0);
  ASSERT_TRUE(testing::WaitFor([&] { return CaptureStacks(rank.pid(), {}).state == 'T'; },
                               absl::Seconds(5)));
  StackCaptureOptions options;
  options.rank_dir = rank.dir();
  const RankStackCapture capture = CaptureStacks(rank.pid(), options);
  EXPECT_EQ(ProcessStateName(capture.state), "stopped");
  EXPECT_TRUE(capture.python.empty()) << "a stopped process runs no handler";
  EXPECT_NE(capture.native.find("TID "), std::string::npos) << capture.native;
  kill(rank.pid(), SIGCONT);
}

TEST(StackCaptureTest, ReadsTheTrainersFlightRecord) {
  const std::string dir = testing::MakeTempDir("flight");
  auto recorder = FlightRecorder::Open(dir + "/flight");
  ASSERT_OK(recorder);
  (*recorder)->Step(1250);
  (*recorder)->Phase(TrainPhase::kAllReduce);
  (*recorder)->Bucket(4);
  StackCaptureOptions options;
  options.rank_dir = dir;
  options.eu_stack = "/nonexistent/eu-stack";
  const RankStackCapture capture = CaptureStacks(getpid(), options);
  ASSERT_TRUE(capture.flight.has_value());
  EXPECT_EQ(capture.flight->step, 1250);
  EXPECT_EQ(capture.flight->bucket, 4);
  EXPECT_NE(capture.native.find("no native stacks"), std::string::npos) << capture.native;
  EXPECT_EQ(CaptureStacks(999999999, options).state, 0) << "gone";
}

// What a rank leaves in place of its stacks file or flight record is read
// only when it is a regular file of the rank's own: not a link to another
// file, nor a FIFO, which would block the worker.
TEST(StackCaptureTest, ALinkOrAFifoInPlaceOfTheRanksFilesIsNotRead) {
  PythonRank rank;
  ASSERT_TRUE(rank.Ready());
  const std::string secret = testing::MakeTempDir("secret") + "/key";
  std::ofstream(secret) << "the worker's secret";
  // The rank's sitecustomize opened the file already: replace it.
  ASSERT_EQ(unlink(rank.stacks().c_str()), 0);
  ASSERT_EQ(symlink(secret.c_str(), rank.stacks().c_str()), 0);
  ASSERT_EQ(mkfifo((rank.dir() + "/flight").c_str(), 0600), 0);
  StackCaptureOptions options;
  options.rank_dir = rank.dir();
  options.python_wait = absl::Seconds(1);
  const RankStackCapture capture = CaptureStacks(rank.pid(), options);
  EXPECT_EQ(capture.python.find("secret"), std::string::npos) << capture.python;
  EXPECT_FALSE(capture.flight.has_value());
  EXPECT_NE(capture.native.find("TID "), std::string::npos) << capture.native;
}

TEST(StackCaptureTest, SummariesNameTheInnermostFrame) {
  EXPECT_EQ(PythonSummary("Thread 0x00007f01 (most recent call first):\n"
                          "  File \"/job/train.py\", line 4 in spin\n"
                          "\n"
                          "Current thread 0x00007f02 (most recent call first):\n"
                          "  File \"/job/train.py\", line 6 in sleep_forever\n"
                          "  File \"/job/train.py\", line 8 in <module>\n"),
            "File \"/job/train.py\", line 6 in sleep_forever");
  EXPECT_EQ(PythonSummary("Thread 0x1 (most recent call first):\n  File \"a.py\", line 1 in f\n"),
            "File \"a.py\", line 1 in f");
  EXPECT_EQ(PythonSummary(""), "");
  EXPECT_EQ(NativeSummary("PID 12 - process\n"
                          "TID 12:\n"
                          "#0  0x00007f1c2a8e4f3f __GI___poll\n"
                          "#1  0x000055d1 gloo::transport::tcp::Pair::waitRecv\n"
                          "#2  0x000055d2 gloo::AllreduceRing::run\n"
                          "#3  0x000055d3 main\n"
                          "TID 13:\n"
                          "#0  0x00007f1c2a8e4f3f futex_wait\n"),
            "__GI___poll < gloo::transport::tcp::Pair::waitRecv < gloo::AllreduceRing::run");
  EXPECT_EQ(NativeSummary("no native stacks: eu-stack not found"), "");
}

}  // namespace
}  // namespace ringmaster
