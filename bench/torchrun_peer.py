"""The torchrun side of bench/recovery.py: PyTorch DDP (Gloo) training of
the same MLP on the same data as the Ringmaster job (digits, 512x512
hidden, batch 16 per rank, AdamW), with rank 0 checkpointing every 500 steps
($PEER_CHECKPOINT_EVERY)
and every start resuming from the newest checkpoint, as a torchrun user
writes it. Events for the benchmark go to $PEER_EVENTS, one per line:

  pid<rank> <pid>                 each rank's process, at each start
  step <restart> <step>           rank 0, every 50 steps
  first <restart> <step> <time>   rank 0, the first step done after a start
"""
import os
import time

import numpy as np
import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

CHECKPOINT_EVERY = int(os.environ.get("PEER_CHECKPOINT_EVERY", "500"))


def event(*words):
    with open(os.environ["PEER_EVENTS"], "a") as f:
        f.write(" ".join(str(w) for w in words) + "\n")


def latest(ckpt_dir):
    steps = [int(n[5:-3]) for n in os.listdir(ckpt_dir) if n.startswith("step-")]
    return os.path.join(ckpt_dir, f"step-{max(steps)}.pt") if steps else None


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    event(f"pid{rank}", os.getpid())
    torch.manual_seed(1)
    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(1).permutation(len(x))
    x, y = x[order], y[order]
    train = int(len(x) * 0.8)
    mean, std = x[:train].mean(0), x[:train].std(0) + 1e-6
    xs = torch.tensor((x[:train] - mean) / std, dtype=torch.float32)
    ys = torch.tensor(y[:train])
    model = DDP(nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                              nn.Linear(512, 10)))
    opt = torch.optim.AdamW(model.parameters(), lr=0.0005 * world, weight_decay=0.01)
    ckpt_dir = os.environ["PEER_CHECKPOINTS"]
    os.makedirs(ckpt_dir, exist_ok=True)
    step, epoch, batch_in_epoch = 0, 0, 0
    path = latest(ckpt_dir)
    if path:
        state = torch.load(path)
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, epoch, batch_in_epoch = state["step"], state["epoch"], state["batch"]
    batch = 16
    first = True
    while True:
        g = torch.Generator().manual_seed(1 + epoch)
        perm = torch.randperm(train, generator=g)[rank::world]
        batches = len(perm) // batch
        for b in range(batch_in_epoch, batches):
            idx = perm[b * batch:(b + 1) * batch]
            opt.zero_grad()
            nn.functional.cross_entropy(model(xs[idx]), ys[idx]).backward()
            opt.step()
            step += 1
            if rank == 0:
                if first:
                    event("first", restart, step - 1, f"{time.time():.3f}")
                    first = False
                if step % 50 == 0:
                    event("step", restart, step)
                if step % CHECKPOINT_EVERY == 0:
                    tmp = os.path.join(ckpt_dir, f"partial-{step}.pt")
                    torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(),
                                "step": step, "epoch": epoch, "batch": b + 1}, tmp)
                    os.replace(tmp, os.path.join(ckpt_dir, f"step-{step}.pt"))
        epoch, batch_in_epoch = epoch + 1, 0


if __name__ == "__main__":
    main()
