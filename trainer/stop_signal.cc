#include "trainer/stop_signal.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace ringmaster {
namespace {

void Say(const std::string& line) {
  // write(2) is all this thread may rely on while others hold stdio locks.
  std::string text = absl::StrCat("ringmaster-trainer: ", line, "\n");
  (void)!write(STDERR_FILENO, text.data(), text.size());
}

}  // namespace

std::unique_ptr<StopSignal> StopSignal::Install(absl::Duration grace) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return std::unique_ptr<StopSignal>(new StopSignal(set, grace));
}

StopSignal::StopSignal(const sigset_t& set, absl::Duration grace) : set_(set), grace_(grace) {
  thread_ = std::thread([this] { Run(); });
}

StopSignal::~StopSignal() {
  done_.Notify();
  thread_.join();
}

void StopSignal::Run() {
  int received = 0;
  while (received <= 0) {
    if (done_.HasBeenNotified()) return;
    const timespec slice{0, 100 * 1000 * 1000};  // to notice done_
    received = sigtimedwait(&set_, nullptr, &slice);
  }
  signal_.store(received, std::memory_order_relaxed);
  Say(absl::StrCat(strsignal(received), ": stopping after the current step"));
  if (done_.WaitForNotificationWithTimeout(grace_)) return;
  Say(absl::StrCat("not stopped ", absl::FormatDuration(grace_), " after ", strsignal(received),
                   "; exiting"));
  _exit(128 + received);
}

}  // namespace ringmaster
