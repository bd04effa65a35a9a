#!/usr/bin/python3
"""Multi-host benchmarks on simulated hosts: each host is a network namespace
with its own address on a bridge, hostname, /tmp and /dev/shm
(tests/simulated_hosts.py), so ranks of different hosts talk only through the
bridge and share memory only with ranks of their own host.

Side by side in one run, at 2 hosts x 1 rank and 2 hosts x 2 ranks:
- training throughput: Ringmaster's trainer against PyTorch DDP (gloo), the
  MLP and batch of bench/ddp_throughput.py;
- all-reduce bus bandwidth, 1 to 64 MB: Ringmaster's hierarchical all-reduce
  (shared memory within a host, a TCP ring per local rank between hosts),
  raw Gloo (gloo::allreduce over TCP between every pair), torch.distributed
  (gloo) and OpenMPI's MPI_Allreduce (TCP between hosts, shared memory
  within: btl self,vader,tcp); at 2 x 1 also OpenMPI's exchange of the same
  bytes each way (MPI_Sendrecv), MPI's own figure for moving them.

Needs root and iproute2 (namespaces), python3-torch, openmpi-bin and
libopenmpi-dev.

    bazel build -c opt //bench:trainer_throughput //bench:allreduce_bandwidth
    /usr/bin/python3 bench/multihost.py [--iterations 10] [--repeats 2]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "tests")
sys.path.insert(0, TESTS)

import allreduce_bandwidth  # noqa: E402
import ddp_throughput  # noqa: E402
import simulated_hosts  # noqa: E402

HOSTS = 2
SIZES_MB = allreduce_bandwidth.SIZES_MB
TORCH_PORT = 29500  # every host has its own ports
# What each rank may use of the machine, on both sides: one BLAS thread.
RANK_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "eth0"}


def host_role(args):
    """Runs this host's ranks of a PyTorch world and prints their result."""
    first, count = args.first_rank, args.ranks
    if args.role == "torch-ddp":
        rate, cpu = ddp_throughput.torch_throughput(args.world, args.steps, args.warmup, first,
                                                    count, args.master, TORCH_PORT)
        print(json.dumps({"samples_per_second": rate, "cpu": cpu}))
    else:
        times = allreduce_bandwidth.torch_times(args.iterations, args.world, first, count,
                                                args.master, TORCH_PORT)
        if times is not None:
            print(json.dumps({str(mb): s for mb, s in times.items()}))


class Bench:
    def __init__(self, hosts, args, work):
        self.hosts = hosts
        self.args = args
        self.work = work  # a directory every host sees (not /tmp: that is per host)

    def on_every_host(self, per_host, timeout=900):
        """Runs per_host(i) -> argv on every host at once; returns stdouts."""
        env = dict(os.environ, **RANK_ENV)
        procs = [self.hosts.popen(i, per_host(i), stdout=subprocess.PIPE, env=env, text=True)
                 for i in range(HOSTS)]
        outs = []
        for i, proc in enumerate(procs):
            out, _ = proc.communicate(timeout=timeout)
            if proc.returncode != 0:
                sys.exit(f"host {i}: {per_host(i)[0]} exited with {proc.returncode}")
            outs.append(out)
        return outs

    def store(self, name):
        path = os.path.join(self.work, name)
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        return path

    @staticmethod
    def share(i, per_host, alone):
        """Host i's (world size, first rank): its share of a world of
        HOSTS * per_host ranks, or alone, a world of its own."""
        return (per_host, 0) if alone else (HOSTS * per_host, i * per_host)

    def ours(self, binary, per_host, *flags, alone=False):
        """Runs one of our bench binaries on every host, its share of the
        world (Bench.share); returns their stdouts."""
        name = os.path.basename(binary)
        stores = ([self.store(f"{name}-{i}") for i in range(HOSTS)] if alone
                  else [self.store(name)] * HOSTS)

        def argv(i):
            world, first = self.share(i, per_host, alone)
            return [binary, "--world", str(world), "--first-rank", str(first),
                    "--ranks", str(per_host), "--host", self.hosts.address(i),
                    "--store", stores[i], *flags]
        return self.on_every_host(argv)

    def ours_trainer(self, per_host, alone=False):
        flags = ["--steps", str(self.args.steps), "--warmup", str(self.args.warmup),
                 "--batch", str(ddp_throughput.BATCH), "--features", str(ddp_throughput.FEATURES),
                 "--classes", str(ddp_throughput.CLASSES),
                 "--hidden", ",".join(map(str, ddp_throughput.HIDDEN))]
        return self.summed(self.ours(self.args.trainer, per_host, *flags, alone=alone))

    @staticmethod
    def summed(outs):
        """Every host's training result: (summed samples/s, host 0's CPU
        shares over its timed steps)."""
        results = [json.loads(out) for out in outs]
        return sum(r["samples_per_second"] for r in results), results[0]["cpu"]

    def torch_role(self, role, per_host, alone=False):
        """Runs this script's `role` on every host, its share of a PyTorch
        world (Bench.share) whose rank 0 is on host 0, or alone, on the host
        itself; returns their stdouts."""
        def argv(i):
            world, first = self.share(i, per_host, alone)
            return [sys.executable, os.path.abspath(__file__), "--role", role,
                    "--world", str(world), "--first-rank", str(first), "--ranks", str(per_host),
                    "--master", self.hosts.address(i if alone else 0),
                    "--steps", str(self.args.steps), "--warmup", str(self.args.warmup),
                    "--iterations", str(self.args.iterations)]
        return self.on_every_host(argv)

    def torch_ddp(self, per_host, alone=False):
        return self.summed(self.torch_role("torch-ddp", per_host, alone))

    def torch_allreduce(self, per_host):
        out = self.torch_role("torch-allreduce", per_host)[0]
        return {int(mb): s for mb, s in json.loads(out).items()}

    def ours_allreduce(self, per_host):
        outs = self.ours(self.args.allreduce, per_host, "--iterations", str(self.args.iterations))
        rows = [json.loads(line) for line in outs[0].splitlines()]
        return {row["bytes"] >> 20: row for row in rows}

    def mpi_allreduce(self, per_host):
        """mpirun on host 0 starts its daemons on the other hosts through an
        agent that enters their namespaces (as ssh would log in)."""
        agent = os.path.join(self.work, "enter-host")
        with open(agent, "w") as f:
            f.write("#!/bin/sh\n# enter-host HOST COMMAND...: runs COMMAND on simulated HOST\n"
                    'host="$1"; shift\ncase "$host" in\n')
            for i in range(HOSTS):
                f.write(f"  {self.hosts.hostname(i)}) exec {' '.join(self.hosts.enter(i))} "
                        f'sh -c "$*" ;;\n')
            f.write('esac\necho "unknown host $host" >&2; exit 1\n')
        os.chmod(agent, 0o755)
        hosts = ",".join(f"{self.hosts.hostname(i)}:{per_host}" for i in range(HOSTS))
        subnet = str(self.hosts.subnet)
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        argv = ["mpirun", "-np", str(HOSTS * per_host), "--host", hosts,
                "--mca", "plm_rsh_agent", agent, "--mca", "btl", "self,vader,tcp",
                "--mca", "btl_tcp_if_include", subnet, "--mca", "oob_tcp_if_include", subnet,
                "--bind-to", "none", self.args.mpi_binary, str(self.args.iterations)]
        r = self.hosts.run(0, argv, timeout=900, env=env)
        if r.returncode != 0:
            sys.exit(f"mpirun exited with {r.returncode}: {r.stderr[-2000:]}")
        rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        return ({row["bytes"] >> 20: row["mpi_seconds"] for row in rows},
                {row["bytes"] >> 20: row["exchange_seconds"] for row in rows})


def by_side(table):
    """(row label, value) for every layout, kind of run and side of a table
    shaped as print_throughput's results."""
    for per_host, row in table.items():
        for kind, sides in row.items():
            for side, value in zip(("ringmaster", "pytorch ddp"), sides):
                yield f"{HOSTS}x{per_host:<6}  {kind:>8}  {side:>12}  ", value


def print_throughput(results, repeats):
    """results: per layout, the (ours, peer) runs, each (samples/s, CPU
    shares), across hosts ("together") and, when measured, with each host
    training alone."""
    best = {per_host: {kind: tuple(max(runs, key=lambda run: run[0]) for runs in sides)
                       for kind, sides in row.items()}
            for per_host, row in results.items()}
    rate = {per_host: {kind: (ours[0], peer[0]) for kind, (ours, peer) in row.items()}
            for per_host, row in best.items()}
    print(f"\ntraining throughput, MLP {ddp_throughput.FEATURES}->"
          f"{'->'.join(map(str, ddp_throughput.HIDDEN))}->{ddp_throughput.CLASSES}, "
          f"batch {ddp_throughput.BATCH}/rank, SGD, 1 thread/rank, best of {repeats}, "
          f"OpenBLAS kernels: {os.environ.get('OPENBLAS_CORETYPE', 'its own choice')}")
    print(f"{'layout':>8}  {'ringmaster':>12}  {'pytorch ddp':>12}  {'ratio':>6}")
    for per_host, row in rate.items():
        ours, peer = row["together"]
        print(f"{HOSTS}x{per_host:<6}  {ours:>10.0f}/s  {peer:>10.0f}/s  {ours / peer:>5.2f}x")
    print("\nevery run, samples/s in the order run")
    for label, runs in by_side(results):
        print(label + " ".join(f"{r:.0f}" for r, _ in runs))
    print("\nthe machine's CPU time (all cores) over the timed steps of the best runs, "
          "as host 0 saw it")
    print(f"{'layout':>8}  {'hosts':>8}  {'side':>12}  " +
          "  ".join(f"{kind:>7}" for kind in ddp_throughput.CPU_KINDS))
    for label, (_, cpu) in by_side(best):
        print(label + "  ".join(f"{cpu[k]:>7.1%}" for k in ddp_throughput.CPU_KINDS))
    if not any("alone" in row for row in rate.values()):
        return
    print("\nthe same ranks with each host a world of its own (no traffic between hosts), "
          "summed, and the share of it each reaches across hosts")
    print(f"{'layout':>8}  {'ringmaster':>12}  {'pytorch ddp':>12}  {'ratio':>6}  "
          f"{'ringmaster':>10}  {'pytorch ddp':>11}")
    for per_host, row in rate.items():
        ours, peer = row["together"]
        ours_alone, peer_alone = row["alone"]
        print(f"{HOSTS}x{per_host:<6}  {ours_alone:>10.0f}/s  {peer_alone:>10.0f}/s  "
              f"{ours_alone / peer_alone:>5.2f}x  {ours / ours_alone:>9.0%}  "
              f"{peer / peer_alone:>10.0%}")


def print_allreduce(per_host, ours, torch, mpi_times, iterations):
    """mpi_times: MPI_Allreduce's seconds per size and, with 2 ranks, those of
    MPI_Sendrecv of the same bytes each way (MPI's own exchange of them)."""
    mpi, exchange = mpi_times
    world = HOSTS * per_host
    factor = 2 * (world - 1) / world

    def busbw(nbytes, seconds):
        return nbytes / seconds / 1e9 * factor

    print(f"\nall-reduce, {HOSTS} hosts x {per_host} ranks, median of {iterations}; busbw GB/s "
          "(algbw x 2(n-1)/n)")
    if world == 2:
        print("exchange: MPI_Sendrecv of the same bytes each way between the two ranks, "
              "nothing summed")
    print(f"{'size':>6}  {'ours (shared)':>13}  {'ours':>6}  {'raw gloo':>8}  {'torch':>6}  "
          f"{'openmpi':>7}" + (f"  {'exchange':>8}" if world == 2 else "") +
          f"  {'shared/raw':>10}  {'shared/mpi':>10}  {'shared/torch':>12}")
    for mb in SIZES_MB:
        nbytes = mb << 20
        row = ours[mb]
        shared, plain, raw = (row["ours_shared_seconds"], row["ours_shm_seconds"],
                              row["raw_gloo_seconds"])
        cells = [busbw(nbytes, s) for s in (shared, plain, raw, torch[mb], mpi[mb])]
        # Two ranks each send and receive n bytes: the exchange's busbw is n / time.
        limit = f"  {busbw(nbytes, exchange[mb]):>8.2f}" if world == 2 else ""
        print(f"{mb:>4}MB  {cells[0]:>13.2f}  {cells[1]:>6.2f}  {cells[2]:>8.2f}  "
              f"{cells[3]:>6.2f}  {cells[4]:>7.2f}{limit}  {raw / shared:>9.2f}x  "
              f"{mpi[mb] / shared:>9.2f}x  {torch[mb] / shared:>11.2f}x")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2, help="best of N training runs each")
    parser.add_argument("--layouts", default="1,2", help="ranks per host to measure")
    parser.add_argument("--only", choices=["throughput", "allreduce"])
    parser.add_argument("--alone", action="store_true",
                        help="also train with each host a world of its own, no traffic between")
    parser.add_argument("--trainer", default="bazel-bin/bench/trainer_throughput")
    parser.add_argument("--allreduce", default="bazel-bin/bench/allreduce_bandwidth")
    parser.add_argument("--mpi-binary", help="an MPI_Allreduce timer (default: built here)")
    # A host's share of a PyTorch world (the driver starts these).
    parser.add_argument("--role", choices=["torch-ddp", "torch-allreduce"])
    parser.add_argument("--world", type=int)
    parser.add_argument("--first-rank", type=int)
    parser.add_argument("--ranks", type=int)
    parser.add_argument("--master")
    args = parser.parse_args()
    if args.role:
        return host_role(args)

    Hosts = simulated_hosts.Hosts
    why = simulated_hosts.unavailable()
    if why:
        sys.exit(f"cannot simulate hosts: {why}")
    for tool in ("mpicc", "mpirun"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} not found: install openmpi-bin and libopenmpi-dev")
    args.trainer = os.path.abspath(args.trainer)
    args.allreduce = os.path.abspath(args.allreduce)
    layouts = [int(x) for x in args.layouts.split(",")]
    work = tempfile.mkdtemp(prefix="ringmaster-multihost-bench-", dir="/var/tmp")
    try:
        if not args.mpi_binary:
            args.mpi_binary = os.path.join(work, "mpi_allreduce")
            subprocess.run(["mpicc", "-O2", "-o", args.mpi_binary,
                            os.path.join(HERE, "mpi_allreduce.c")], check=True)
        with Hosts(HOSTS) as hosts:
            bench = Bench(hosts, args, work)
            if args.only != "allreduce":
                results = {}
                for per_host in layouts:
                    runs = {"together": ([], [])}
                    if args.alone:
                        runs["alone"] = ([], [])
                    for _ in range(args.repeats):  # interleaved, so drift hits all alike
                        for kind, (ours, peer) in runs.items():
                            ours.append(bench.ours_trainer(per_host, kind == "alone"))
                            peer.append(bench.torch_ddp(per_host, kind == "alone"))
                    results[per_host] = runs
                print_throughput(results, args.repeats)
            if args.only != "throughput":
                for per_host in layouts:
                    print_allreduce(per_host, bench.ours_allreduce(per_host),
                                    bench.torch_allreduce(per_host),
                                    bench.mpi_allreduce(per_host), args.iterations)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
