#!/usr/bin/env python3
"""A hyperparameter sweep on Ringmaster: 8 jobs of the built-in trainer on
scikit-learn's handwritten digits, over a grid of learning rates and batch
sizes, all carrying one `sweep` label. One watch_jobs follows them all and
keeps a live table; at the end it prints the best held-out accuracy and
its settings.

    pip install ./python            # or PYTHONPATH=python
    ringmaster up                   # a local cluster, if you have none
    python3 examples/sweep.py       # finds the cluster as the CLI does

Options: --coordinator, --tls-dir (as the CLI's), --epochs, --ranks.
"""
import argparse
import itertools
import sys
import time
import uuid

import ringmaster
from ringmaster.v1 import job_pb2

LEARNING_RATES = [0.0005, 0.001, 0.003, 0.01]
BATCH_SIZES = [32, 128]


def spec(sweep: str, index: int, lr: float, batch_size: int, epochs: int, ranks: int) -> dict:
    return {
        "name": f"sweep-{sweep}-{index}",
        "ranks": ranks,
        "labels": {"sweep": sweep, "lr": str(lr), "batch_size": str(batch_size)},
        "trainer": {
            "model": {"type": "mlp", "hidden": [128, 128]},
            "data": {"path": "digits", "test_fraction": 0.2},
            "epochs": epochs,
            "batch_size": batch_size,
            "optimizer": {"type": "adamw", "lr": lr, "weight_decay": 0.01},
            "seed": 1,
        },
    }


def table(jobs: dict, live: bool) -> str:
    rows = [f"{'job':<28} {'lr':>7} {'batch':>5} {'state':<10} {'step':>11} {'accuracy':>8}"]
    for job in sorted(jobs.values(), key=lambda j: j.id):
        p = job.progress
        accuracy = f"{p.eval_accuracy:.4f}" if p.eval_accuracy else "-"
        steps = f"{p.step}/{p.total_steps}" if p.total_steps else "-"
        rows.append(f"{job.id:<28} {job.spec.labels['lr']:>7} {job.spec.labels['batch_size']:>5} "
                    f"{job_pb2.JobState.Name(job.state):<10} {steps:>11} {accuracy:>8}")
    # On a terminal, draw the table over itself; else print it as it is.
    return ("\033[H\033[J" if live else "") + "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coordinator", help="host:port, or several (as RINGMASTER_COORDINATOR)")
    parser.add_argument("--tls-dir", help="as RINGMASTER_TLS_DIR")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--ranks", type=int, default=1)
    args = parser.parse_args()
    live = sys.stdout.isatty()

    client = ringmaster.Client(args.coordinator, tls_dir=args.tls_dir)
    sweep = uuid.uuid4().hex[:8]
    ids = []
    grid = itertools.product(LEARNING_RATES, BATCH_SIZES)
    for index, (lr, batch_size) in enumerate(grid):
        ids.append(client.submit(spec(sweep, index, lr, batch_size, args.epochs, args.ranks)))
    print(f"sweep {sweep}: submitted {len(ids)} jobs", flush=True)

    jobs = {}
    last_drawn = 0.0
    for event in client.watch_jobs(labels={"sweep": sweep}):
        jobs[event.job.id] = event.job
        ended = sum(j.state in (job_pb2.SUCCEEDED, job_pb2.FAILED, job_pb2.CANCELLED)
                    for j in jobs.values())
        if time.monotonic() - last_drawn > (0.5 if live else 5.0) or ended == len(ids):
            print(table(jobs, live), flush=True)
            last_drawn = time.monotonic()
        if ended == len(ids):
            break

    finished = [j for j in jobs.values() if j.state == job_pb2.SUCCEEDED]
    failed = [j for j in jobs.values() if j.state != job_pb2.SUCCEEDED]
    for job in failed:
        print(f"{job.id}: {job_pb2.JobState.Name(job.state)}: {job.root_cause.message}")
    if not finished:
        print("no job of the sweep succeeded")
        return 1
    best = max(finished, key=lambda j: j.progress.eval_accuracy)
    print(f"best: {best.id}: accuracy {best.progress.eval_accuracy:.4f} with lr "
          f"{best.spec.labels['lr']}, batch size {best.spec.labels['batch_size']}")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
