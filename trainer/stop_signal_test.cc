#include "trainer/stop_signal.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

// Each case runs in a child of its own: the signal mask is per process.
int ExitOfChild(void (*body)()) {
  const pid_t child = fork();
  if (child == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
}

bool PollFor(const StopSignal& stop, std::chrono::seconds deadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (!stop.requested() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return stop.requested();
}

TEST(StopSignalTest, SigtermBecomesARequestNotADeath) {
  EXPECT_EQ(ExitOfChild([] {
              auto stop = StopSignal::Install(absl::Seconds(60));
              if (stop->requested()) _exit(2);
              kill(getpid(), SIGTERM);
              if (!PollFor(*stop, std::chrono::seconds(10))) _exit(3);
              _exit(stop->signal() == SIGTERM ? 7 : 4);
            }),
            7);
}

TEST(StopSignalTest, AProcessThatDoesNotStopWithinTheGraceExitsAsTheSignalWould) {
  EXPECT_EQ(ExitOfChild([] {
              auto stop = StopSignal::Install(absl::Milliseconds(100));
              kill(getpid(), SIGTERM);
              // Blocked, as in a collective on a hung peer.
              std::this_thread::sleep_for(std::chrono::seconds(30));
              _exit(5);
            }),
            128 + SIGTERM);
}

TEST(StopSignalTest, EndsCleanlyWithoutASignal) {
  EXPECT_EQ(ExitOfChild([] {
              auto stop = StopSignal::Install(absl::Seconds(1));
              stop.reset();
              _exit(9);
            }),
            9);
}

}  // namespace
}  // namespace ringmaster
