"""A PyTorch DDP script whose restarts go on from the step they were on:
ringmaster.checkpoint keeps each step's model and optimizer in its
worker's memory (and a peer's), and load() gives them back after a rank
or a worker fails. Run it as a job:

    name: ddp-checkpoint
    ranks: 2
    max_restarts: 3
    command: [python3, pytorch_checkpoint.py, "300"]

Each step's batch comes from a generator seeded by the step and the rank,
so a run that restarts ends with the weights of one that never did; the
script prints a digest of them at the end.
"""
import hashlib
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import ringmaster
import ringmaster.checkpoint

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
pause = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0  # seconds per step

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 4))
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)

start = 0
loaded = ringmaster.checkpoint.load()  # every rank, after init_process_group
if loaded is not None:
    state, start = loaded
    net.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    print(f"resumed at step {start}", flush=True)
model = DDP(net)

for step in range(start + 1, steps + 1):
    g = torch.Generator().manual_seed(step * world + rank)
    x = torch.randn(32, 64, generator=g)
    y = torch.randint(0, 4, (32,), generator=g)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    # Returns at once; the copy is written on a thread of its own.
    ringmaster.checkpoint.save({"model": net.state_dict(), "optimizer": opt.state_dict()}, step,
                               persist=step % 100 == 0)
    ringmaster.report(step=step, loss=loss.item(), samples=32, total_steps=steps)
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f}", flush=True)
    if pause:
        time.sleep(pause)

digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in net.parameters()))
print(f"rank {rank}: final weights {digest.hexdigest()[:16]}", flush=True)
dist.destroy_process_group()
