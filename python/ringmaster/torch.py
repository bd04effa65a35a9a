"""ringmaster.torch.instrument(ddp_model): times each gradient bucket's
all-reduce and reports its bytes and seconds (ringmaster.report), from which
the worker gives the all-reduce bus bandwidth of the rank.

It is a DDP communication hook doing what DDP does by default (average the
bucket with an all-reduce); a model can have one hook, so a model that
already registers its own should report with ringmaster.report instead.
"""
import time

import torch.distributed as dist

import ringmaster

__all__ = ["instrument"]


def _timed_allreduce(state, bucket):
    group = state if state is not None else dist.group.WORLD
    world = dist.get_world_size(group)
    tensor = bucket.buffer()
    nbytes = tensor.numel() * tensor.element_size()
    start = time.perf_counter()
    tensor.div_(world)
    future = dist.all_reduce(tensor, group=group, async_op=True).get_future()

    def done(fut):
        ringmaster.report(allreduce_bytes=nbytes,
                          allreduce_seconds=time.perf_counter() - start)
        return fut.value()[0]

    return future.then(done)


def instrument(ddp_model, process_group=None):
    """Registers the timed all-reduce on `ddp_model` (a DistributedDataParallel);
    returns it."""
    ringmaster.report(backend=dist.get_backend(process_group))
    ddp_model.register_comm_hook(process_group, _timed_allreduce)
    return ddp_model
