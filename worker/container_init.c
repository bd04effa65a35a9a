// ringmaster-container-init COMMAND [ARG...]: PID 1 of a rank's container.
//
// The first process of a pid namespace ignores every signal it has no
// handler for, so a rank's program run as PID 1 would never see the
// SIGTERM that stops it, and the orphans it leaves would never be reaped.
// This runs the command as its child, passes it every signal it gets, reaps
// whatever ends, and exits as the command did (128 + the signal when one
// killed it). Statically linked, and in C: it runs in any image.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s COMMAND [ARG...]\n", argv[0]);
    return 2;
  }
  sigset_t all, previous;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &previous);
  const pid_t child = fork();
  if (child < 0) {
    fprintf(stderr, "ringmaster-container-init: fork: %s\n", strerror(errno));
    return 127;
  }
  if (child == 0) {
    sigprocmask(SIG_SETMASK, &previous, NULL);
    execv(argv[1], argv + 1);
    fprintf(stderr, "ringmaster-container-init: cannot run %s: %s\n", argv[1], strerror(errno));
    _exit(127);
  }
  for (;;) {
    int signal = 0;
    if (sigwait(&all, &signal) != 0) continue;
    if (signal != SIGCHLD) {
      kill(child, signal);
      continue;
    }
    int status = 0;
    pid_t ended;
    while ((ended = waitpid(-1, &status, WNOHANG)) > 0) {
      if (ended != child) continue;  // an orphan, reaped
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return WEXITSTATUS(status);
    }
  }
}
