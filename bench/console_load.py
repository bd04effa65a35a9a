#!/usr/bin/python3
"""What the console's live streams cost the coordinator: submit latency with
and without 50 browsers' worth of Server-Sent Events on one job.

A local cluster (`ringmaster up`, TLS, 4 workers of 26 slots) runs 100
one-rank jobs and one 2-rank job that prints a line and reports progress
every 0.1 s. Each round measures N submissions (the Python client over
gRPC, 100 a second, each timed) twice, in turn:

- without streams;
- with 50 browsers on the chatty job, each a user of its own with the
  job's page open (its watch), and the job's owner following its logs in
  30 more (curl -N, 80 streams: a user may not read another's logs, and
  one caller holds at most 32 streams). With --with-list each browser has
  the jobs list open too (every job's changes: 130 streams).

Prints each round's p50 and p99 in both, then the p99 of every submission
of each kind and the ratio (goal: at most 1.2). The submitted jobs wait for
slots (3 ranks, and the cluster has 2 free) and are cancelled after each
half, so both halves see the same number of jobs.

    bazel build -c opt //client:ringmaster //coordinator:ringmaster-coordinator \\
        //worker:ringmaster-worker
    /usr/bin/python3 bench/console_load.py --submits 1000 --rounds 3 [--with-list]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import ringmaster  # noqa: E402

CLI = os.path.join(ROOT, "bazel-bin", "client", "ringmaster")
TOKEN = "console-load-admin-token-0123456789"
BROWSERS = 50
LOG_FOLLOWERS = 30  # the job owner's pages following its logs (32 streams a caller at most)
CHATTY = """name: chatty
ranks: 2
command: [python3, -c, "import ringmaster, time; [(ringmaster.report(step=s, loss=1.0 / s, \
samples=32), print('step', s, flush=True), time.sleep(0.1)) for s in range(1, 100000)]"]
"""
# Three ranks: more than the 2 slots the running jobs leave, so it waits.
PROBE = "name: probe\nranks: 3\ncommand: [sleep, '1']\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Cluster:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="console-load-")
        self.address = f"127.0.0.1:{free_port()}"
        self.env = dict(os.environ, RINGMASTER_TOKEN=TOKEN, RINGMASTER_COORDINATOR=self.address,
                        RINGMASTER_TLS_DIR=os.path.join(self.dir, "tls"))

    def cli(self, *args):
        done = subprocess.run([CLI, *args], env=self.env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"ringmaster {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def up(self):
        ranks = ["--rank-user", "root"] if os.geteuid() == 0 else []
        up = json.loads(self.cli("up", "--workers", "4", "--slots", "26", "--state-dir",
                                 self.dir, "-o", "json", *ranks))
        self.http = up["http"]
        self.client = ringmaster.Client(self.address, tls_dir=os.path.join(self.dir, "tls"),
                                        token=TOKEN)

    def down(self):
        subprocess.run([CLI, "down", "--state-dir", self.dir], env=self.env,
                       capture_output=True)

    def wait_running(self, count):
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            running = list(self.client.jobs(states=["RUNNING"]))
            if len(running) >= count:
                return
            time.sleep(0.5)
        sys.exit(f"fewer than {count} jobs running after 300 s")


def user_tokens(cluster):
    """A user's token per browser: a caller holds at most 32 streams."""
    tokens = []
    for i in range(BROWSERS):
        issued = subprocess.run(
            [os.path.join(ROOT, "bazel-bin", "coordinator", "ringmaster-coordinator"),
             "--state-dir", os.path.join(cluster.dir, "coordinator"), "--issue-user-token",
             f"viewer{i}"], capture_output=True, text=True, check=True)
        tokens.append(issued.stdout.strip())
    return tokens


def open_streams(cluster, job_id, tokens, workdir, with_list):
    """The streams of BROWSERS browsers, each a user of its own with
    `job_id`'s page open (the job's watch) and, `with_list`, the jobs list
    too (every job's watch), and of its owner (the admin) following its logs
    in LOG_FOLLOWERS pages. Returns once each has had its first event; one
    refused fails the benchmark (curl -f writes nothing and exits)."""
    opened = []
    paths = [f"/api/v1/jobs/{job_id}:watch"] + (["/api/v1/jobs:watch"] if with_list else [])
    for token in tokens:
        for path in paths:
            opened.append((token, path))
    for _ in range(LOG_FOLLOWERS):
        opened.append((TOKEN, f"/api/v1/jobs/{job_id}/logs?follow=true&allRanks=true"
                              "&tailLines=100"))
    streams = []
    for i, (token, path) in enumerate(opened):
        out = os.path.join(workdir, f"stream-{i}")
        f = open(out, "wb")
        streams.append((subprocess.Popen(
            ["curl", "-sfN", "--cacert", os.path.join(cluster.dir, "tls", "ca.crt"), "-H",
             f"Authorization: Bearer {token}", cluster.http + path],
            stdout=f, stderr=subprocess.DEVNULL), f, out))
    deadline = time.monotonic() + 120
    while any(os.path.getsize(out) == 0 for _, _, out in streams):
        ended = [out for curl, _, out in streams if curl.poll() is not None]
        if ended:
            sys.exit(f"{len(ended)} streams were refused or ended")
        if time.monotonic() > deadline:
            sys.exit("not every stream had an event within 120 s")
        time.sleep(0.2)
    return streams


def close_streams(streams):
    received = 0
    for curl, f, out in streams:
        curl.terminate()
        curl.wait()
        f.close()
        received += os.path.getsize(out)
        os.unlink(out)
    return received


def submit_latencies(cluster, count, rate):
    """Seconds of each of `count` submissions, `rate` a second."""
    seconds, ids = [], []
    begin = time.perf_counter()
    for i in range(count):
        time.sleep(max(0.0, begin + i / rate - time.perf_counter()))
        start = time.perf_counter()
        ids.append(cluster.client.submit(PROBE, upload=False))
        seconds.append(time.perf_counter() - start)
    for job_id in ids:
        try:
            cluster.client.cancel(job_id)
        except ringmaster.RingmasterError:
            pass  # ended already
    return seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--submits", type=int, default=1000, help="per half of a round")
    parser.add_argument("--rate", type=float, default=100.0, help="submissions a second")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--with-list", action="store_true",
                        help="each browser has the jobs list open too (every job's changes)")
    args = parser.parse_args()
    cluster = Cluster()
    cluster.up()
    try:
        for i in range(100):
            cluster.client.submit(f"name: busy-{i}\nranks: 1\ncommand: [sleep, '3600']\n",
                                  upload=False)
        chatty = cluster.client.submit(CHATTY, upload=False)
        cluster.wait_running(101)
        tokens = user_tokens(cluster)
        stream_count = (2 if args.with_list else 1) * BROWSERS + LOG_FOLLOWERS
        pages = f"the jobs list and {chatty}'s page" if args.with_list else f"{chatty}'s page"
        print(f"101 jobs running; {BROWSERS} browsers on {pages}, and "
              f"{LOG_FOLLOWERS} following its logs: {stream_count} streams")
        print(f"{'round':>5}  {'without p50':>11} {'p99':>8}  {'with p50':>9} {'p99':>8}  "
              f"{'streamed':>9}")
        without, with_streams = [], []
        for r in range(args.rounds):
            alone = submit_latencies(cluster, args.submits, args.rate)
            streams = open_streams(cluster, chatty, tokens, cluster.dir, args.with_list)
            loaded = submit_latencies(cluster, args.submits, args.rate)
            received = close_streams(streams)
            without += alone
            with_streams += loaded
            print(f"{r + 1:>5}  {statistics.median(alone) * 1e3:>8.2f} ms "
                  f"{percentile(alone, 0.99) * 1e3:>5.2f} ms  "
                  f"{statistics.median(loaded) * 1e3:>6.2f} ms {percentile(loaded, 0.99) * 1e3:>5.2f}"
                  f" ms  {received / 2**20:>6.1f} MiB")
        p99_without = percentile(without, 0.99)
        p99_with = percentile(with_streams, 0.99)
        print(f"submit p99 over {len(without)} submissions each: without streams "
              f"{p99_without * 1e3:.2f} ms, with {stream_count} streams {p99_with * 1e3:.2f} ms: "
              f"{p99_with / p99_without:.2f}x (goal: at most 1.2x)")
    finally:
        cluster.down()


if __name__ == "__main__":
    main()
