"""The cost of Ringmaster's two lines in a PyTorch DDP script:
ringmaster.torch.instrument(ddp_model) (a comm hook timing each bucket's
all-reduce) and ringmaster.report(...) once a step, against the same script
without them, interleaved, 2 ranks over gloo on this host. Outside a job,
report() records but sends nothing: the sending is a thread of its own, off
the training loop, and is not what is measured here. A third row runs
torch's own Python all-reduce hook (default_hooks.allreduce_hook): what any
Python comm hook costs against DDP's built-in C++ one. Last, what the
sender thread spends making one report's message (RankProgress, serialized)
with a typical rank's figures.

    /usr/bin/python3 bench/python_hook.py --steps 300 --repeats 5
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import ringmaster  # noqa: E402
import ringmaster.torch  # noqa: E402


def rank_main(rank, world, port, steps, mode, hidden, results):
    instrumented = mode == "instrumented"
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(256, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                              nn.ReLU(), nn.Linear(hidden, 10)))
    if instrumented:
        ringmaster.torch.instrument(model)
    elif mode == "python_hook":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        model.register_comm_hook(None, default_hooks.allreduce_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    loss_fn = nn.CrossEntropyLoss()
    for step in range(steps + 20):
        if step == 20:  # warm-up done
            dist.barrier()
            start = time.perf_counter()
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if instrumented:
            ringmaster.report(step=step, loss=loss.item(), samples=64)
    dist.barrier()
    if rank == 0:
        results.put(steps / (time.perf_counter() - start))
    dist.destroy_process_group()


def run(steps, mode, hidden, port):
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    procs = [ctx.Process(target=rank_main, args=(r, 2, port, steps, mode, hidden, results))
             for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            sys.exit(f"a rank failed with {p.exitcode}")
    return results.get()


def encoding_cost(calls=20000, repeats=5):
    """Microseconds to make one report's message, and its size."""
    figures = {"step": 1234, "total_steps": 5000, "epoch": 3, "loss": 0.4321, "samples": 79000,
               "samples_per_second": 1234.5, "allreduce_bytes": 1.5e9,
               "allreduce_seconds": 12.5, "step_seconds": [0.0123] * 5,
               "compute_seconds": 9.5, "compute_steps": 1234, "world_size": 8,
               "backend": "gloo"}
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            message = ringmaster._rank_progress("train-12", 1, 3, figures)
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6, len(message)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=1024)
    args = parser.parse_args()
    plain, python_hook, hooked = [], [], []
    port = 29600
    for _ in range(args.repeats):
        for mode, out in (("plain", plain), ("python_hook", python_hook),
                          ("instrumented", hooked)):
            port += 1
            out.append(run(args.steps, mode, args.hidden, port))
    params = 256 * args.hidden + args.hidden * args.hidden + args.hidden * 10
    print(f"2 ranks, gloo, MLP of {params / 1e6:.2f} M parameters, batch 64, "
          f"{args.steps} steps x {args.repeats} interleaved runs")
    print(f"{'':28} {'median steps/s':>15} {'best':>8}")
    print(f"{'DDP':28} {statistics.median(plain):15.1f} {max(plain):8.1f}")
    print(f"{'DDP + torch allreduce_hook':28} {statistics.median(python_hook):15.1f} "
          f"{max(python_hook):8.1f}")
    print(f"{'DDP + instrument + report':28} {statistics.median(hooked):15.1f} {max(hooked):8.1f}")
    ratio = statistics.median(hooked) / statistics.median(plain)
    print(f"ratio (instrumented / plain, medians): {ratio:.3f}  "
          f"overhead {100 * (1 - ratio):+.1f}%")
    ratio = statistics.median(hooked) / statistics.median(python_hook)
    print(f"ratio (instrumented / torch's own Python hook, medians): {ratio:.3f}  "
          f"overhead {100 * (1 - ratio):+.1f}%")
    micros, size = encoding_cost()
    print(f"one report's message (sender thread, at most twice a second): {micros:.2f} us, "
          f"{size} bytes (best of 5 x 20000)")


if __name__ == "__main__":
    main()
