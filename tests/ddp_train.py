# An unmodified PyTorch DDP script, as users write it for torchrun: every
# setting comes from the environment (env:// rendezvous at MASTER_ADDR:MASTER_PORT).
import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")  # env:// — MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = DDP(nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    x = torch.randn(16, 8) + rank
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
w = model.module.weight.detach().clone()
gathered = [torch.zeros_like(w) for _ in range(world)]
dist.all_gather(gathered, w)
assert all(torch.equal(g, w) for g in gathered), "replicas diverged"
print(f"rank {rank}/{world} local_rank {os.environ['LOCAL_RANK']}: replicas agree, loss {loss.item():.4f}", flush=True)
dist.destroy_process_group()
