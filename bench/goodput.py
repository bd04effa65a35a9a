#!/usr/bin/python3
"""Goodput under failures: a two-rank job on the digits data, for a fixed
time, with a rank killed (SIGKILL) every 30 s, ranks 1 and 0 in turn, and
once, half way, the whole worker of rank 1 instead; the same training under
torchrun beside it, on the same schedule, checkpointing with torch.save
every 100 steps (bench/torchrun_peer.py; torchrun runs on one machine, so
its "worker" is both rank processes at once, which its agent restarts).

Goodput here is the same figure for both: the steps the job holds at the
end that it did not hold at its first step (net progress) over the steps
an undisturbed run of it makes in the same wall time (its rate measured
first, for 60 s, without failures). Ringmaster's own measure, from its
coordinator (`status`: productive time over wall time, and the time lost by
cause), is printed beside it.

    bazel build -c opt //...
    /usr/bin/python3 bench/goodput.py [--seconds 300] [--no-torchrun]
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from chaos_cluster import Cluster, state, step, wait_for  # noqa: E402

SPEC = """
name: goodput
ranks: 2
max_restarts: 100
trainer:
  model: {type: mlp, hidden: [512, 512]}
  data: {path: digits, test_fraction: 0.2}
  epochs: 100000
  batch_size: 16
  optimizer: {type: adamw, lr: 0.0005, weight_decay: 0.01}
  lr_scaling: linear
  warmup_steps: 20
  checkpoint_every_steps: 500
  seed: 1
"""
KILL_EVERY_S = 30
UNDISTURBED_S = 60


def schedule(seconds):
    """(time, what) for each failure: ranks 1 and 0 in turn, the worker of
    rank 1 at the middle one."""
    times = list(range(KILL_EVERY_S, int(seconds), KILL_EVERY_S))
    middle = len(times) // 2
    return [(t, "worker" if i == middle else f"rank {1 - i % 2}") for i, t in enumerate(times)]


def held(job):
    """The step the job holds: where it is, or, between attempts (its
    progress cleared), its consistent step in memory."""
    return max(step(job), int(job.get("snapshots", {}).get("consistent_step", 0)))


def rank_of(job, r):
    return next(x for x in job.get("ranks", []) if int(x.get("rank", 0)) == r)


def ringmaster(seconds, failures):
    """(steps at the first step, steps at the end, wall seconds, the job)."""
    root = tempfile.mkdtemp(prefix="goodput-")
    with Cluster(root, workers=3) as c:
        c.start()
        job_id = c.submit(SPEC)
        first = wait_for(lambda: (lambda j: j if j and step(j) > 0 else None)(c.job(job_id)),
                         120, "the first step")
        began = time.monotonic()
        for at, what in failures:
            while time.monotonic() - began < at:
                time.sleep(0.05)
            job = wait_for(lambda: (lambda j: j if j and state(j) == "RUNNING" and all(
                "pid" in r for r in j.get("ranks", [])) else None)(c.job(job_id)), 60,
                "running ranks")
            if what == "worker":
                c.signal_worker(c.worker_index(rank_of(job, 1)["worker_id"]), signal.SIGKILL)
            else:
                os.kill(int(rank_of(job, int(what[-1]))["pid"]), signal.SIGKILL)
            print(f"  ringmaster {time.monotonic() - began:5.1f} s: killed {what}", flush=True)
        while time.monotonic() - began < seconds:
            time.sleep(0.05)
        end = c.job(job_id)
        wall = time.monotonic() - began
        c.cli("cancel", job_id, check=False)
    return held(first), held(end), wall, end


def torchrun(seconds, failures, checkpoint_every):
    """(steps at the first step, steps at the end, wall seconds)."""
    peer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchrun_peer.py")
    work = tempfile.mkdtemp(prefix="goodput-torchrun-")
    events = os.path.join(work, "events")
    env = dict(os.environ, PEER_EVENTS=events, PEER_CHECKPOINTS=os.path.join(work, "ckpt"),
               PEER_CHECKPOINT_EVERY=str(checkpoint_every), OMP_NUM_THREADS="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
         "--max_restarts", "100", "--redirects", "1", "--tee", "1",
         "--log_dir", os.path.join(work, "logs"), peer], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)

    def read(kind):
        try:
            with open(events) as f:
                return [line.split() for line in f if line.startswith(kind)]
        except OSError:
            return []
    try:
        wait_for(lambda: read("first"), 120, "torchrun's first step")
        began = time.monotonic()
        first_step = 0
        for at, what in failures:
            while time.monotonic() - began < at:
                time.sleep(0.05)
            pid1 = int(read("pid1")[-1][1])
            pid0 = int(read("pid0")[-1][1])
            for pid in ([pid0, pid1] if what == "worker" else [pid1 if what == "rank 1" else pid0]):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            print(f"  torchrun   {time.monotonic() - began:5.1f} s: killed {what}", flush=True)
        while time.monotonic() - began < seconds:
            time.sleep(0.05)
        last = max(int(e[2]) for e in read("step")) if read("step") else 0
        return first_step, last, time.monotonic() - began
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--checkpoint-every", type=int, default=100,
                        help="torchrun's torch.save interval, in steps")
    parser.add_argument("--no-torchrun", action="store_true")
    args = parser.parse_args()
    failures = schedule(args.seconds)
    print(f"{len(failures)} failures in {args.seconds:.0f} s: "
          + ", ".join(f"{what} at {t} s" for t, what in failures))

    print(f"undisturbed, {UNDISTURBED_S} s each:", flush=True)
    a, b, wall, _ = ringmaster(UNDISTURBED_S, [])
    ours_rate = (b - a) / wall
    print(f"  ringmaster {ours_rate:.1f} steps/s", flush=True)
    if not args.no_torchrun:
        a, b, wall = torchrun(UNDISTURBED_S, [], args.checkpoint_every)
        theirs_rate = (b - a) / wall
        print(f"  torchrun   {theirs_rate:.1f} steps/s", flush=True)

    print("under failures:", flush=True)
    a, b, wall, job = ringmaster(args.seconds, failures)
    ours = (b - a) / (ours_rate * wall)
    g = job.get("goodput", {})
    lost = ", ".join(f"{cause} {float(s):.1f} s"
                     for cause, s in sorted(g.get("lost_seconds", {}).items()))
    rows = [("ringmaster", ours, b - a, wall)]
    if not args.no_torchrun:
        a, b, wall = torchrun(args.seconds, failures, args.checkpoint_every)
        rows.append(("torchrun", (b - a) / (theirs_rate * wall), b - a, wall))

    print()
    print(f"{'':<11} {'goodput':>8} {'net steps':>10} {'wall':>8}")
    for name, ratio, steps, wall in rows:
        print(f"{name:<11} {ratio:>8.3f} {steps:>10} {wall:>6.0f} s")
    print(f"ringmaster's coordinator: goodput {float(g.get('ratio', 0)):.3f} "
          f"(productive {float(g.get('productive_seconds', 0)):.1f} s of "
          f"{float(g.get('wall_seconds', 0)):.1f} s; lost: {lost or 'none'})")
    if len(rows) > 1:
        print(f"ringmaster / torchrun goodput: {rows[0][1] / rows[1][1]:.2f}x")


if __name__ == "__main__":
    main()
