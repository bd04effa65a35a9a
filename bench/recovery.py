#!/usr/bin/python3
"""Recovery after failures: for each kind of failure, the time from the
failure to the first step completed after recovery, and the steps redone.

Each run starts a fresh local cluster (a coordinator and three one-slot
workers, default flags, tests/chaos_cluster.py), submits a two-rank trainer
job on the digits data with a checkpoint every 500 steps (and, by default,
a snapshot in its workers' memory every step: docs/checkpoints.md), lets it
pass its first checkpoint, injects the failure and watches the job's
progress:

  killed rank         kill -9 of rank 1: rank 1 alone is started again, rank 0
                      keeps its process (the default --regroup-timeout)
  killed rank, all    the same with --regroup-timeout 0: every rank restarts
  killed worker       kill -9 of the worker running rank 1
  hung rank           kill -STOP of rank 1 (hang_timeout_s: 10)
  coordinator restart kill -9 of the coordinator, started again at once

"first step" is from the failure to when rank 0 completed its first step
of the new attempt, or of the attempt's new group when rank 1 alone was
replaced (`progress.first_step_unix_ms`, which its reports carry); for the
coordinator restart, the first step reported to the new coordinator.
"from" is where the new attempt got its state: "memory" (its workers'
snapshots), "replica" (some rank's from a peer's replica) or "disk".
"steps redone" is the step the failed attempt reached (its ranks log
"failed after step N", "stopped after step N" when stopped, or "lost a
peer after step N" when they keep their process; else the last step it
reported) minus the step the new attempt resumed from.

The killed-rank row is also run under torchrun (torch.distributed.run,
--max-restarts 3, its default monitor interval) with a DDP script doing
the same training and checkpointing (bench/torchrun_peer.py), and the
ratio is printed. torchrun's step at the failure is the last of the steps
its rank 0 notes every 50, so its steps redone may be short by up to 50.

    bazel build -c opt //...
    /usr/bin/python3 bench/recovery.py [--repeats 3]
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from chaos_cluster import Cluster, attempt, state, step, wait_for  # noqa: E402

HANG_TIMEOUT_S = 10
SPEC = f"""
name: recovery
ranks: 2
max_restarts: 10
hang_timeout_s: {HANG_TIMEOUT_S}
trainer:
  model: {{type: mlp, hidden: [512, 512]}}
  data: {{path: digits, test_fraction: 0.2}}
  epochs: 2000
  batch_size: 16
  optimizer: {{type: adamw, lr: 0.0005, weight_decay: 0.01}}
  lr_scaling: linear
  warmup_steps: 20
  checkpoint_every_steps: 500
  seed: 1
"""


def update_ms(job):
    return int(job.get("progress", {}).get("update_unix_ms", 0))


def rank(job, r):
    return next(x for x in job["ranks"] if int(x.get("rank", 0)) == r)


def poll(c, job_id, until, timeout):
    """Polls the job as fast as the CLI answers until `until(job)`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = c.job(job_id)
        if job is not None and until(job):
            return job
    raise TimeoutError(f"{job_id}: no recovery within {timeout} s")


def generation(job):
    return int(job.get("group_generation", 0))


def resumed_here(job):
    """Whether the job's resume record is of its current attempt and group."""
    r = job.get("resumed", {})
    return (int(r.get("attempt", 0)), int(r.get("generation", 0))) == (attempt(job),
                                                                        generation(job))


def first_step_ms(job):
    return int(job.get("progress", {}).get("first_step_unix_ms", 0))


def reported_generation(job):
    return int(job.get("progress", {}).get("group_generation", 0))


def measure(kind):
    root = tempfile.mkdtemp(prefix=f"recovery-{kind.replace(' ', '-').replace(',', '')}-")
    flags = ["--regroup-timeout", "0"] if kind == "killed rank, all" else []
    with Cluster(root, workers=3, coordinator_flags=flags) as c:
        c.start()
        job_id = c.submit(SPEC)
        job = c.wait_job(job_id, lambda j: state(j) == "RUNNING" and step(j) > 700, 120,
                         "past its first checkpoint")
        before = c.job(job_id)
        old_attempt, last_step = attempt(before), step(before)
        old_generation = generation(before)
        victim = rank(before, 1)
        failed_at = time.time()
        if kind.startswith("killed rank"):
            os.kill(int(victim["pid"]), signal.SIGKILL)
        elif kind == "killed worker":
            c.signal_worker(c.worker_index(victim["worker_id"]), signal.SIGKILL)
        elif kind == "hung rank":
            os.kill(int(victim["pid"]), signal.SIGSTOP)
        elif kind == "coordinator restart":
            c.kill_coordinator()
            c.start_coordinator()
        if kind == "coordinator restart":
            job = poll(c, job_id, lambda j: update_ms(j) > failed_at * 1000, 60)
            redone = max(0, last_step - step(job))
            if attempt(job) != old_attempt:
                raise RuntimeError(f"the coordinator restart restarted the job: {job}")
        else:
            # Until rank 0's report says where it resumed from (the job's
            # progress is its lowest reporting rank's, which may be rank 1's
            # first).
            job = poll(c, job_id, lambda j: (attempt(j) > old_attempt or
                                             generation(j) > old_generation) and
                       reported_generation(j) == generation(j) and
                       first_step_ms(j) > failed_at * 1000 and resumed_here(j), 120)
            logs = c.logs(job_id)
            # "resuming from DIR/step-N" (disk) or "resuming at step N" (memory).
            resumed = [int(s) for s in
                       re.findall(r"resuming (?:from \S*/step-|at step )(\d+)", logs)]
            # Where the failed attempt got to, as its ranks said on their way
            # out; else its last report.
            ended = [int(s) for s in
                     re.findall(r"(?:failed|stopped|lost a peer) after step (\d+)", logs)]
            redone = (max(ended) if ended else last_step) - resumed[-1]
        if kind == "coordinator restart":
            seconds = update_ms(job) / 1000 - failed_at
        else:
            # When rank 0 completed that step, as it says in every report.
            seconds = int(job["progress"].get("first_step_unix_ms", 0)) / 1000 - failed_at
        source = job.get("resumed", {}).get("from", "-") if kind != "coordinator restart" else "-"
        c.cli("cancel", job_id, check=False)
    return seconds, redone, source


def torchrun_killed_rank(peer):
    """torchrun's figures for a killed rank, the same way."""
    work = tempfile.mkdtemp(prefix="recovery-torchrun-")
    events = os.path.join(work, "events")
    env = dict(os.environ, PEER_EVENTS=events, PEER_CHECKPOINTS=os.path.join(work, "ckpt"),
               OMP_NUM_THREADS="1")
    proc = subprocess.Popen(
        # --redirects/--tee 1: Debian's torch 1.13 under Python 3.11 cannot
        # parse their default, 0.
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
         "--max_restarts", "3", "--redirects", "1", "--tee", "1",
         "--log_dir", os.path.join(work, "logs"), peer], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)

    def read():
        try:
            with open(events) as f:
                return [line.split() for line in f]
        except OSError:
            return []
    try:
        wait_for(lambda: any(e[0] == "step" and int(e[2]) > 700 for e in read()), 120,
                 "torchrun job past its first checkpoint")
        last = [e for e in read() if e[0] == "step"][-1]
        last_step, pid = int(last[2]), int([e for e in read() if e[0] == "pid1"][-1][1])
        failed_at = time.time()
        os.kill(pid, signal.SIGKILL)
        first = wait_for(lambda: next((e for e in read() if e[0] == "first" and
                                       float(e[3]) > failed_at), None), 120,
                         "torchrun job stepping again")
        return float(first[3]) - failed_at, last_step - int(first[2])
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-torchrun", action="store_true")
    args = parser.parse_args()
    targets = {"killed rank": "<= 1.0 s, 0 steps", "killed rank, all": "0 steps",
               "killed worker": "<= 2 s, 0 steps",
               "hung rank": f"< {HANG_TIMEOUT_S + 3} s (hang_timeout {HANG_TIMEOUT_S} s + 3)",
               "coordinator restart": "0 steps redone"}
    rows = {}
    for kind in targets:
        runs = [measure(kind) for _ in range(args.repeats)]
        rows[kind] = runs
        print(f"{kind}: " + ", ".join(f"{s:.2f} s / {r} steps from {f}" for s, r, f in runs),
              flush=True)
    print()
    print(f"Ringmaster, default flags, median of {args.repeats} runs each")
    print(f"{'failure':<20} {'to first step':>14} {'steps redone':>13} {'from':>8}   target")
    for kind, runs in rows.items():
        sources = "/".join(sorted({f for _, _, f in runs}))
        print(f"{kind:<20} {statistics.median(s for s, _, _ in runs):>12.2f} s "
              f"{statistics.median(r for _, r, _ in runs):>13.0f} {sources:>8}   {targets[kind]}")
    if args.no_torchrun:
        return
    peer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchrun_peer.py")
    peer_runs = [torchrun_killed_rank(peer) for _ in range(args.repeats)]
    print()
    print("killed rank, same training and checkpoints, median of", args.repeats)
    ours = statistics.median(s for s, _, _ in rows["killed rank"])
    theirs = statistics.median(s for s, _ in peer_runs)
    print(f"  torchrun:   {theirs:.2f} s to first step, "
          f"{statistics.median(r for _, r in peer_runs):.0f} steps redone  (runs: "
          + ", ".join(f"{s:.2f}" for s, _ in peer_runs) + ")")
    print(f"  ringmaster: {ours:.2f} s to first step")
    print(f"  torchrun / ringmaster: {theirs / ours:.2f}x")


if __name__ == "__main__":
    main()
