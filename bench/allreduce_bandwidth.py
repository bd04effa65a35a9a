#!/usr/bin/python3
"""All-reduce bandwidth, 1 to 64 MB, 2 ranks on this host: Ringmaster's
collective layer (as the trainer uses it: gradients in memory the local ranks
share, reduced in place; on ordinary buffers through shared memory; and over
TCP like Gloo) against raw Gloo and torch.distributed's Gloo, side by side. Bandwidths as nccl-tests reports them: algbw = bytes / time,
busbw = algbw * 2(n-1)/n.

    bazel build -c opt //bench:allreduce_bandwidth
    /usr/bin/python3 bench/allreduce_bandwidth.py [--iterations 20]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

SIZES_MB = [1, 2, 4, 8, 16, 32, 64]
WORLD = 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_rank(rank, world, master, port, iterations, out):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{master}:{port}",
                            rank=rank, world_size=world)
    results = {}
    for mb in SIZES_MB:
        t = torch.ones(mb << 18)
        times = []
        for it in range(-2, iterations):
            start = time.perf_counter()
            dist.all_reduce(t)
            elapsed = time.perf_counter() - start
            t.fill_(1.0)
            if it >= 0:
                times.append(elapsed)
        results[mb] = sorted(times)[len(times) // 2]
    if rank == 0:
        out.put(results)
    dist.destroy_process_group()


def torch_times(iterations, world=WORLD, first=0, count=None, master="127.0.0.1", port=None):
    """Median seconds per size (MB) of torch.distributed's all-reduce, from
    rank 0, when ranks first..first+count-1 (default: all) run here; None
    when rank 0 runs elsewhere."""
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = port or free_port()
    count = world - first if count is None else count
    procs = [ctx.Process(target=torch_rank, args=(r, world, master, port, iterations, out))
             for r in range(first, first + count)]
    for p in procs:
        p.start()
    results = out.get() if first == 0 else None
    for p in procs:
        p.join()
    return results


def ours_times(binary, iterations):
    out = subprocess.run([binary, "--world", str(WORLD), "--iterations", str(iterations)],
                         check=True, capture_output=True, text=True).stdout
    return {json.loads(line)["bytes"] >> 20: json.loads(line) for line in out.splitlines()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--binary", default="bazel-bin/bench/allreduce_bandwidth")
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"
    ours = ours_times(args.binary, args.iterations)
    torch = torch_times(args.iterations)
    factor = 2 * (WORLD - 1) / WORLD

    def bw(nbytes, seconds):
        algbw = nbytes / seconds / 1e9
        return algbw, algbw * factor

    print(f"all-reduce, {WORLD} ranks on this host, median of {args.iterations}; "
          "GB/s as algbw / busbw")
    print(f"{'size':>6}  {'ours (shared)':>13}  {'ours (shm)':>13}  {'ours (tcp)':>13}  "
          f"{'raw gloo':>13}  {'torch gloo':>13}  {'shared/raw':>10}  {'tcp/raw':>7}  "
          f"{'shared/torch':>12}")
    for mb in SIZES_MB:
        nbytes = mb << 20
        row = ours[mb]
        shared, shm, tcp, raw = (row["ours_shared_seconds"], row["ours_shm_seconds"],
                                 row["ours_tcp_seconds"], row["raw_gloo_seconds"])
        peer = torch[mb]
        cells = [bw(nbytes, s) for s in (shared, shm, tcp, raw, peer)]
        text = "  ".join(f"{a:5.2f} / {b:5.2f}" for a, b in cells)
        print(f"{mb:>4}MB  {text}  {raw / shared:9.2f}x  {raw / tcp:6.2f}x  "
              f"{peer / shared:11.2f}x")


if __name__ == "__main__":
    main()
