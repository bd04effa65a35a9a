#include "domain/flight_recorder.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

TEST(FlightRecorderTest, AnotherProcessReadsWhereTheRankIsEvenWhileItIsStopped) {
  const std::string path = testing::MakeTempDir("flight") + "/rank-1";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto recorder = FlightRecorder::Open(path);
    if (!recorder.ok()) _exit(1);
    (*recorder)->Step(1250);
    (*recorder)->Phase(TrainPhase::kAllReduce);
    (*recorder)->Bucket(4);
    raise(SIGSTOP);  // as a hung rank would be
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, WUNTRACED), child);
  ASSERT_TRUE(WIFSTOPPED(status));
  absl::StatusOr<FlightState> state = ReadFlightRecord(path);
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
  ASSERT_OK(state) << state.status();
  EXPECT_EQ(state->step, 1250);
  EXPECT_EQ(state->phase, TrainPhase::kAllReduce);
  EXPECT_EQ(state->bucket, 4);
  EXPECT_GT(state->since_unix_ms, 0);
  EXPECT_STREQ(PhaseName(state->phase), "all-reduce");
}

TEST(FlightRecorderTest, NoRecordOrAnotherFileIsAnError) {
  const std::string dir = testing::MakeTempDir("flight");
  EXPECT_THAT(ReadFlightRecord(dir + "/none").status(), StatusIs(absl::StatusCode::kNotFound));
  std::ofstream(dir + "/other") << "not a record at all, but long enough to be read whole";
  EXPECT_THAT(ReadFlightRecord(dir + "/other").status(), StatusIs(absl::StatusCode::kDataLoss));
}

}  // namespace
}  // namespace ringmaster
