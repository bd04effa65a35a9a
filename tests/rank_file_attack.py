"""A rank of tests/rank_files_test.cc: the victim, or a hostile rank.

ROLE=victim keeps a secret in its home (mode 0600) and sleeps.

ROLE=attacker puts TARGET (a path the link names, or "fifo") in place of
FILE, one of the files the worker reads in the rank's own directory
(stacks, flight, error.json), and then waits for the worker to read it:
the stacks file when the worker asks for Python's stacks (SIGRTMIN+5),
the flight record at once, the error file by failing.

ROLE=dirs tries to write where the worker keeps the job's files (its job
directory, its log directory, the rank's own directory's name) and prints
a verdict for each; it leaves links to ESCAPE in its home and in its own
directory, which deleting the job must not follow.
"""

import os
import signal
import sys
import time


def victim():
    path = os.path.join(os.environ["HOME"], "secret.json")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, ('{"message": "%s"}' % os.environ["SECRET"]).encode())
    os.close(fd)
    print("victim ready", flush=True)
    time.sleep(600)


def attacker():
    own = os.path.dirname(os.environ["TORCHELASTIC_ERROR_FILE"])
    name = os.environ["FILE"]
    target = os.environ["TARGET"]
    path = os.path.join(own, name)

    def plant(*_):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        if target == "fifo":
            os.mkfifo(path, 0o666)
        else:
            os.symlink(target, path)

    if name == "stacks":
        # faulthandler writes the stacks when the worker signals: the
        # file appears only then, and grows, as the worker expects.
        signal.signal(signal.SIGRTMIN + 5, plant)
    else:
        plant()
    print("armed", flush=True)
    if name == "error.json":
        sys.exit(3)
    time.sleep(600)


def attempt(name, action):
    try:
        action()
        print("ATTACK %s: done" % name, flush=True)
    except OSError as error:
        print("ATTACK %s: refused (%s)" % (name, error.strerror), flush=True)


def dirs():
    own = os.path.dirname(os.environ["TORCHELASTIC_ERROR_FILE"])
    job_dir = os.path.dirname(own)
    log_dir = os.path.join(os.environ["LOG_ROOT"], os.environ["RINGMASTER_JOB_ID"])
    escape = os.environ["ESCAPE"]
    attempt("write-job-dir", lambda: os.symlink(escape, os.path.join(job_dir, "planted")))
    attempt("rename-own-dir", lambda: os.rename(own, own + ".moved"))
    attempt("write-log-dir", lambda: os.symlink(escape, os.path.join(log_dir, "planted")))
    attempt(
        "replace-log",
        lambda: os.rename(os.path.join(log_dir, "attempt-0.rank-0.log"),
                          os.path.join(log_dir, "moved")))
    os.symlink(escape, os.path.join(os.environ["HOME"], "escape"))
    os.symlink(escape, os.path.join(own, "escape"))
    print("ATTACKS DONE", flush=True)


{"victim": victim, "attacker": attacker, "dirs": dirs}[os.environ["ROLE"]]()
