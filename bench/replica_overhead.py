#!/usr/bin/python3
"""What pushing snapshots to a peer's memory costs a job: a two-rank trainer
job on two one-slot workers of a local cluster (tests/chaos_cluster.py),
with a snapshot every step, run with replicas on (the workers' default
--replica-time-share 0.03) and off (0), in turns. Each run trains past a
warm-up, then its steps are counted over a window from the job's progress.

Printed: steps/s of each run and the median of each setting, their ratio
(replicas on over off), the state each rank snapshots, and how far the
replicas trail: the job's consistent step (every rank's newest snapshot in
its own worker's memory) less its replica step (the newest every rank has
on a peer), sampled each second.

    bazel build -c opt //...
    /usr/bin/python3 bench/replica_overhead.py [--repeats 3] [--window 30]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from chaos_cluster import Cluster, state, step, wait_for  # noqa: E402

SPEC = """
name: replicas
ranks: 2
trainer:
  model: {type: mlp, hidden: [2048, 2048]}
  data: {path: "synthetic:rows=200000,features=512,classes=10"}
  epochs: 100
  batch_size: 64
  optimizer: {type: adamw, lr: 0.0005, weight_decay: 0.01}
  checkpoint_every_steps: 0
  checkpoint_every_s: 0
  seed: 1
"""
WARMUP_STEPS = 50


def snapshots(job):
    s = job.get("snapshots", {})
    return (int(s.get("consistent_step", 0)), int(s.get("replica_step", 0)),
            int(s.get("bytes_per_rank", 0)))


def run(share, window):
    root = tempfile.mkdtemp(prefix=f"replicas-{share}-")
    with Cluster(root, workers=2, worker_flags=["--replica-time-share", str(share)]) as c:
        c.start()
        job_id = c.submit(SPEC)
        wait_for(lambda: (lambda j: j and state(j) == "RUNNING" and step(j) > WARMUP_STEPS)(
            c.job(job_id)), 180, "past its warm-up")
        first = c.job(job_id)
        lags = []
        deadline = time.monotonic() + window
        while time.monotonic() < deadline:
            time.sleep(1)
            consistent, replica, _ = snapshots(c.job(job_id))
            if consistent > 0:
                lags.append(consistent - replica)
        last = c.job(job_id)
        c.cli("cancel", job_id, check=False)
    seconds = (int(last["progress"]["update_unix_ms"]) -
               int(first["progress"]["update_unix_ms"])) / 1000
    return (step(last) - step(first)) / seconds, lags, snapshots(last)[2]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--window", type=float, default=30, help="seconds counted per run")
    args = parser.parse_args()
    rates = {0.03: [], 0.0: []}
    lags, state_bytes = [], 0
    for i in range(args.repeats):
        for share in rates:
            rate, lag, state_bytes = run(share, args.window)
            rates[share].append(rate)
            if share > 0:
                lags += lag
            print(f"run {i + 1}, --replica-time-share {share}: {rate:.1f} steps/s"
                  + (f", replica lag median {statistics.median(lag):.0f} steps" if lag and share
                     else ""), flush=True)
    on, off = statistics.median(rates[0.03]), statistics.median(rates[0.0])
    print()
    print(f"two ranks on two workers, a snapshot every step of {state_bytes / 2**20:.1f} MiB "
          f"per rank, median of {args.repeats} runs of {args.window:.0f} s")
    print(f"  replicas off (--replica-time-share 0):    {off:.1f} steps/s")
    print(f"  replicas on  (--replica-time-share 0.03): {on:.1f} steps/s")
    print(f"  on / off: {on / off:.3f} ({(on / off - 1) * 100:+.1f}%)")
    if lags:
        print(f"  replicas trail the newest snapshot by {statistics.median(lags):.0f} steps "
              f"(median), {max(lags)} at most")


if __name__ == "__main__":
    main()
