# A PyTorch DDP script with Ringmaster's two lines added: the hook that
# times each bucket's all-reduce, and a report per step.
import os
import sys
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import ringmaster
import ringmaster.torch

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = ringmaster.torch.instrument(DDP(nn.Sequential(nn.Linear(64, 256), nn.ReLU(),
                                                      nn.Linear(256, 4))))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
steps, batch = int(sys.argv[1]), 32
for step in range(1, steps + 1):
    x = torch.randn(batch, 64) + rank
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    ringmaster.report(step=step, loss=loss.item(), samples=batch, total_steps=steps)
w = model.module[0].weight.detach().clone()
gathered = [torch.zeros_like(w) for _ in range(world)]
dist.all_gather(gathered, w)
assert all(torch.equal(g, w) for g in gathered), "replicas diverged"
print(f"rank {rank}: {steps} steps, replicas agree", flush=True)
dist.destroy_process_group()
