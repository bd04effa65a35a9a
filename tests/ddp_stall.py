# A PyTorch DDP script whose rank 1 falls asleep at step 20, in stall(): the
# other ranks then wait in the all-reduce of step 21 until the job is
# declared hung.
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import ringmaster


def stall():
    time.sleep(3600)


dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1, 1000000):
    if rank == 1 and step == 20:
        print("rank 1 stalls", flush=True)
        stall()
    loss = model(torch.randn(32, 64)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    ringmaster.report(step=step, loss=loss.item(), samples=32)
