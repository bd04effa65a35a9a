"""ringmaster.torch.instrument(ddp_model): times each gradient bucket's
all-reduce and reports its bytes and seconds (ringmaster.report), from which
the worker gives the all-reduce bus bandwidth of the rank; and times each
step's compute, from which the coordinator names stragglers.

It is a DDP communication hook doing what DDP does by default (average the
bucket with an all-reduce); a model can have one hook, so a model that
already registers its own should report with ringmaster.report instead.

A step's compute time is the time from the end of the step before (its last
bucket reduced) to the moment its own last bucket is ready: forward,
backward and the optimizer, but not the wait for the buckets' all-reduces,
which a slow peer lengthens for everyone.
"""
import threading
import time

import torch.distributed as dist

import ringmaster

__all__ = ["instrument"]


class _State:
    """The hook's: its process group, and when the step before had its last
    bucket reduced."""

    def __init__(self, group):
        self.group = group
        self._lock = threading.Lock()  # futures complete on another thread
        self._reduced = None

    def compute_seconds(self, now):
        """The step's last bucket is ready now: its compute time, or None."""
        with self._lock:
            return None if self._reduced is None else now - self._reduced

    def last_reduced(self, now):
        with self._lock:
            self._reduced = now


def _timed_allreduce(state, bucket):
    start = time.perf_counter()
    last = bucket.is_last()
    if last:
        compute = state.compute_seconds(start)
        if compute is not None:
            ringmaster.report(compute_seconds=compute)
    group = state.group if state.group is not None else dist.group.WORLD
    world = dist.get_world_size(group)
    tensor = bucket.buffer()
    nbytes = tensor.numel() * tensor.element_size()
    tensor.div_(world)
    future = dist.all_reduce(tensor, group=group, async_op=True).get_future()

    def done(fut):
        now = time.perf_counter()
        ringmaster.report(allreduce_bytes=nbytes, allreduce_seconds=now - start)
        if last:
            state.last_reduced(now)
        return fut.value()[0]

    return future.then(done)


def instrument(ddp_model, process_group=None):
    """Registers the timed all-reduce on `ddp_model` (a DistributedDataParallel);
    returns it."""
    ringmaster.report(backend=dist.get_backend(process_group))
    ddp_model.register_comm_hook(_State(process_group), _timed_allreduce)
    return ddp_model
