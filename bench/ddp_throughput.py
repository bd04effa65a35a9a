#!/usr/bin/python3
"""Training throughput: Ringmaster's trainer against PyTorch DDP, side by side.

Both train the same MLP (256 -> 2048 -> 2048 -> 2048 -> 10) with SGD and
momentum on synthetic data, batch 256 per rank, one BLAS thread per rank,
Gloo on the CPU, at world 1 and 2. Prints samples/s of each, the ratio,
and the scaling efficiency from world 1 to world 2. Then Ringmaster's
trainer at world 2 with a snapshot of its whole state into worker-held
memory after every step (docs/checkpoints.md), staged and bucketed,
against none, with the memory each rank's snapshots hold.

    bazel build -c opt //bench:trainer_throughput
    /usr/bin/python3 bench/ddp_throughput.py [--steps 30] [--warmup 5] [--repeats 3]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

FEATURES, HIDDEN, CLASSES, BATCH = 256, [2048, 2048, 2048], 10, 256


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CPU_KINDS = ("user", "system", "softirq", "idle")


def machine_cpu_ticks():
    """The machine's CPU ticks, all CPUs, by CPU_KINDS, from /proc/stat's
    first line: user and nice, system and steal, softirq and irq, idle and
    iowait (as the trainer's benchmark reads them)."""
    with open("/proc/stat") as f:
        user, nice, system, idle, iowait, irq, softirq, steal = map(int, f.readline().split()[1:9])
    return (user + nice, system + steal, irq + softirq, idle + iowait)


def cpu_shares(before, after):
    """The machine's CPU time between two machine_cpu_ticks(), as shares."""
    total = sum(after) - sum(before)
    return {kind: (b - a) / total for kind, a, b in zip(CPU_KINDS, before, after)}


def torch_rank(rank, world, master, port, steps, warmup, out):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{master}:{port}",
                            rank=rank, world_size=world)
    torch.manual_seed(1)
    widths = [FEATURES] + HIDDEN + [CLASSES]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(nn.ReLU())
    model = DDP(nn.Sequential(*layers), bucket_cap_mb=25)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(rank)
    rows = steps * BATCH
    x = torch.randn(rows, FEATURES, generator=g)
    y = torch.randint(0, CLASSES, (rows,), generator=g)
    times = []
    for step in range(steps):
        idx = torch.arange(step * BATCH, (step + 1) * BATCH)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        times.append(time.perf_counter())
        if step == warmup - 1:
            ticks_at_warmup = machine_cpu_ticks()
    rate = (steps - warmup) * BATCH / (times[-1] - times[warmup - 1])
    out.put((rank, rate, cpu_shares(ticks_at_warmup, machine_cpu_ticks())))
    dist.destroy_process_group()


def torch_throughput(world, steps, warmup, first=0, count=None, master="127.0.0.1", port=None):
    """Summed samples/s of ranks first..first+count-1 (default: all) of a
    PyTorch DDP world whose rank 0 listens on master:port, and the
    machine's cpu_shares() over the timed steps as rank `first` saw them."""
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = port or free_port()
    count = world - first if count is None else count
    procs = [ctx.Process(target=torch_rank, args=(r, world, master, port, steps, warmup, out))
             for r in range(first, first + count)]
    for p in procs:
        p.start()
    rates = [out.get() for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode != 0:
            sys.exit(f"PyTorch rank exited with {p.exitcode}")
    return sum(rate for _, rate, _ in rates), min(rates, key=lambda r: r[0])[2]


def ours_run(binary, world, steps, warmup, snapshots="off", checkpoint_every=0):
    """The trainer benchmark's JSON line."""
    out = subprocess.run(
        [binary, "--world", str(world), "--steps", str(steps), "--warmup", str(warmup),
         "--batch", str(BATCH), "--features", str(FEATURES), "--classes", str(CLASSES),
         "--hidden", ",".join(map(str, HIDDEN)), "--snapshots", snapshots,
         "--checkpoint-every", str(checkpoint_every)],
        check=True, capture_output=True, text=True, env=os.environ).stdout
    return json.loads(out)


def ours_throughput(binary, world, steps, warmup):
    return ours_run(binary, world, steps, warmup)["samples_per_second"]


def snapshot_overhead(binary, steps, warmup, repeats):
    """World 2 with a snapshot of the whole state after every step, copied
    on the training thread (staged) or written into the snapshot by each
    bucket's update on the reducer's thread (bucketed), against none; runs
    interleaved, best of `repeats`."""
    modes = ("off", "staged", "bucketed")
    runs = {mode: [] for mode in modes}
    disk = []  # bucketed snapshots and a checkpoint to disk every 10 steps
    for _ in range(repeats):
        for mode in modes:
            runs[mode].append(ours_run(binary, 2, steps, warmup, mode))
        disk.append(ours_run(binary, 2, steps, warmup, "bucketed", checkpoint_every=10))
    best = {mode: max(runs[mode], key=lambda r: r["samples_per_second"]) for mode in modes}
    off = best["off"]["samples_per_second"]
    print()
    print(f"snapshots every step, world 2, best of {repeats}; snapshot figures are rank 0's")
    print(f"{'copy':>9}  {'samples/s':>10}  {'vs off':>7}  {'held/rank':>10}  "
          f"{'copy ms/step':>12}  {'commit ms':>9}  {'wait ms/step':>12}")
    for mode in modes:
        r = best[mode]
        snap = r["snapshots"]
        n = max(1, snap["committed"])
        held = f"{2 * snap['bytes'] / 2**20:.1f} MiB" if snap["committed"] else "-"
        print(f"{mode:>9}  {r['samples_per_second']:>8.0f}/s  "
              f"{r['samples_per_second'] / off - 1:>+6.1%}  {held:>10}  "
              f"{1e3 * snap['copy_seconds'] / n:>12.2f}  {1e3 * snap['commit_seconds'] / n:>9.2f}  "
              f"{1e3 * snap['wait_seconds'] / n:>12.2f}")
    d = max(disk, key=lambda r: r["samples_per_second"])
    ck = d["checkpoints"]
    n = max(1, ck["written"])
    blocks = 1e3 * (ck["stage_seconds"] + ck["wait_seconds"]) / n
    write = 1e3 * ck["write_seconds"] / n
    print(f"and a checkpoint to disk every 10 steps ({ck['written']} written): "
          f"{d['samples_per_second']:.0f}/s ({d['samples_per_second'] / off - 1:+.1%} vs off); "
          f"each blocks its step {blocks:.1f} ms (a staging copy; the first allocates it) and is "
          f"written in {write:.1f} ms in the background, where written in the step it would "
          f"block it {blocks + write:.1f} ms")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="best of N runs each")
    parser.add_argument("--binary", default="bazel-bin/bench/trainer_throughput")
    parser.add_argument("--no-snapshots", action="store_true",
                        help="leave out the snapshot overhead rows")
    parser.add_argument("--only-snapshots", action="store_true",
                        help="only the snapshot overhead rows")
    args = parser.parse_args()
    # One BLAS thread per rank on both sides, as the trainer runs in a job.
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["OPENBLAS_NUM_THREADS"] = "1"

    if args.only_snapshots:
        snapshot_overhead(args.binary, args.steps, args.warmup, args.repeats)
        return
    results = {}
    for world in (1, 2):
        ours, peer = [], []
        for _ in range(args.repeats):  # interleaved, so drift hits both alike
            ours.append(ours_throughput(args.binary, world, args.steps, args.warmup))
            peer.append(torch_throughput(world, args.steps, args.warmup)[0])
        results[world] = (max(ours), max(peer))

    print(f"MLP {FEATURES}->{'->'.join(map(str, HIDDEN))}->{CLASSES}, batch {BATCH}/rank, "
          f"SGD, Gloo, 1 thread/rank, best of {args.repeats}, "
          f"OpenBLAS kernels: {os.environ.get('OPENBLAS_CORETYPE', 'its own choice')}")
    print(f"{'world':>5}  {'ringmaster':>12}  {'pytorch ddp':>12}  {'ratio':>6}")
    for world, (ours, peer) in results.items():
        print(f"{world:>5}  {ours:>10.0f}/s  {peer:>10.0f}/s  {ours / peer:>5.2f}x")
    eff_ours = results[2][0] / (2 * results[1][0])
    eff_peer = results[2][1] / (2 * results[1][1])
    print(f"scaling efficiency 1->2: ringmaster {eff_ours:.0%}, pytorch ddp {eff_peer:.0%}")
    if not args.no_snapshots:
        snapshot_overhead(args.binary, args.steps, args.warmup, args.repeats)


if __name__ == "__main__":
    main()
