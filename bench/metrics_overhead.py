#!/usr/bin/python3
"""Trainer throughput with metrics on against off, side by side.

"On" relays the trainer's progress into a worker's metrics every half second
(as a job's rank reports to its worker) and serializes the registry every
second (as a Prometheus scrape does); "off" does neither. Runs alternate, so
drift hits both alike; prints the median samples/s of each and the gap.

    bazel build -c opt //bench:trainer_throughput
    /usr/bin/python3 bench/metrics_overhead.py [--repeats 7] [--world 2]
"""
import argparse
import json
import os
import statistics
import subprocess


def run(binary, world, steps, metrics):
    args = [binary, "--world", str(world), "--steps", str(steps), "--warmup", "5"]
    if metrics:
        args.append("--metrics")
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["samples_per_second"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--binary", default="bazel-bin/bench/trainer_throughput")
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"
    on, off = [], []
    for i in range(args.repeats):
        # Alternate which runs first.
        for metrics in ((True, False) if i % 2 == 0 else (False, True)):
            (on if metrics else off).append(run(args.binary, args.world, args.steps, metrics))
    m_on, m_off = statistics.median(on), statistics.median(off)
    print(f"world {args.world}, {args.steps} steps, median of {args.repeats} alternating runs")
    print(f"metrics on:  {m_on:8.0f} samples/s   (runs: {', '.join(f'{x:.0f}' for x in on)})")
    print(f"metrics off: {m_off:8.0f} samples/s   (runs: {', '.join(f'{x:.0f}' for x in off)})")
    print(f"on/off: {m_on / m_off:.4f} ({(m_on / m_off - 1) * 100:+.2f}%)")


if __name__ == "__main__":
    main()
