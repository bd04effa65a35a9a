#!/usr/bin/python3
"""What TLS costs: two local clusters side by side, one `ringmaster up`
(TLS, credentials) and one `ringmaster up --no-tls`, interleaved:

- submit latency: wall time of `ringmaster submit` (a new process, so a new
  connection and, with TLS, a handshake) of a trivial job, median of N;
- a trainer job with 72 MB of parameters (2 ranks, all-reduce through
  shared memory, no rendezvous traffic after start): seconds from submit to
  SUCCEEDED and the samples/s it reports, median of R.

Prints both figures and the ratio TLS / plaintext. Run after
`bazel build -c opt //...`.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "bazel-bin", "client", "ringmaster")

# 256 features -> 4096 -> 4096 -> 10: 17.8 M float parameters, 71 MB of
# gradients all-reduced each step.
TRAINER_SPEC = """name: big-{tag}
ranks: 2
trainer:
  model: {{type: mlp, hidden: [4096, 4096]}}
  data: {{path: 'synthetic:rows=2048,features=256,classes=10'}}
  epochs: 1
  batch_size: 64
  checkpoint_every_steps: 0
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, tls):
        self.tls = tls
        self.dir = tempfile.mkdtemp(prefix="tls-cost-")
        self.env = dict(os.environ, RINGMASTER_COORDINATOR=f"127.0.0.1:{free_port()}",
                        RINGMASTER_TLS_DIR=os.path.join(self.dir, "tls") if tls else "")
        self.env.pop("RINGMASTER_TOKEN", None)

    def cli(self, *args, check=True):
        r = subprocess.run([CLI, *args], env=self.env, capture_output=True, text=True)
        if check and r.returncode != 0:
            sys.exit(f"ringmaster {' '.join(args)}: {r.stderr.strip()}")
        return r

    def up(self):
        # As root, ranks would run as a uid per job: the same for both
        # clusters, and able to reach the benchmark's files.
        ranks = ["--rank-user", "root"] if os.geteuid() == 0 else []
        self.cli("up", "--workers", "2", "--slots", "1", "--state-dir", self.dir,
                 *([] if self.tls else ["--no-tls"]), *ranks)

    def down(self):
        self.cli("down", "--state-dir", self.dir, check=False)

    def submit_seconds(self, spec_path):
        start = time.perf_counter()
        self.cli("submit", spec_path)
        return time.perf_counter() - start

    def run_job(self, spec_path):
        start = time.perf_counter()
        out = self.cli("submit", spec_path, "--follow").stdout
        seconds = time.perf_counter() - start
        job_id = out.split("\n", 1)[0].strip()
        status = self.cli("status", job_id).stdout
        rate = 0.0
        for line in status.splitlines():
            if line.startswith("progress:") and "samples/s" in line:
                rate = float(line.split("samples/s")[0].split()[-1])
        return seconds, rate


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--submits", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    tls, plain = Cluster(True), Cluster(False)
    try:
        tls.up()
        plain.up()
        trivial = os.path.join(tls.dir, "trivial.yaml")
        with open(trivial, "w") as f:
            f.write("name: trivial\nranks: 1\ncommand: [true]\n")
        latency = {True: [], False: []}
        for _ in range(args.submits):
            for c in (tls, plain):
                latency[c.tls].append(c.submit_seconds(trivial))
        jobs = {True: [], False: []}
        for i in range(args.repeats):
            for c in (plain, tls) if i % 2 else (tls, plain):
                spec = os.path.join(c.dir, f"big-{i}.yaml")
                with open(spec, "w") as f:
                    f.write(TRAINER_SPEC.format(tag=i))
                jobs[c.tls].append(c.run_job(spec))
    finally:
        tls.down()
        plain.down()

    def med(values):
        return statistics.median(values)

    print(f"submit latency (`ringmaster submit`, median of {args.submits}):")
    print(f"  TLS       {med(latency[True]) * 1000:7.1f} ms")
    print(f"  plaintext {med(latency[False]) * 1000:7.1f} ms")
    print(f"  ratio TLS/plaintext {med(latency[True]) / med(latency[False]):.3f}")
    print(f"72 MB trainer job (2 ranks, median of {args.repeats}):")
    for name, key in (("TLS", True), ("plaintext", False)):
        print(f"  {name:9} {med([s for s, _ in jobs[key]]):6.2f} s submit to SUCCEEDED, "
              f"{med([r for _, r in jobs[key]]):8.0f} samples/s")
    print(f"  ratio TLS/plaintext: time "
          f"{med([s for s, _ in jobs[True]]) / med([s for s, _ in jobs[False]]):.3f}, "
          f"samples/s {med([r for _, r in jobs[True]]) / med([r for _, r in jobs[False]]):.3f}")


if __name__ == "__main__":
    main()
