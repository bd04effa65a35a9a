# A PyTorch DDP script whose steps are mostly compute (a wider model, batches
# of 1024, one thread per rank), instrumented with ringmaster.torch, that
# trains until it is stopped.
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import ringmaster
import ringmaster.torch

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = ringmaster.torch.instrument(DDP(nn.Sequential(
    nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 4))))
opt = torch.optim.SGD(model.parameters(), lr=0.001)
step = 0
while True:
    x = torch.randn(1024, 256) + rank
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    ringmaster.report(step=step, loss=loss.item(), samples=1024)
