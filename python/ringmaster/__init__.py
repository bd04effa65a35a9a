"""Ringmaster's Python package: a client of its API, and helpers for a
rank's own program.

    client = ringmaster.Client()
    job_id = client.submit("job.yaml")
    job = client.wait(job_id)

ringmaster.Client (and ringmaster.aio.Client, on asyncio) submits, lists,
watches, cancels and deletes jobs and reads their logs; its errors are
ringmaster.errors' (RingmasterError, NotFound, PermissionDenied, InvalidSpec,
Unavailable, JobFailed). See help(ringmaster.Client).

Inside a rank:

    import ringmaster
    ringmaster.report(step=step, loss=loss.item(), samples=len(batch))

sends this rank's progress to its worker, which shows it in `ringmaster
status`, `top`, the `submit --follow` bar, /metrics and the dashboard, as it
does for the built-in trainer. `ringmaster.torch.instrument(ddp_model)` adds
the all-reduce's bytes and seconds (a DDP communication hook).
`ringmaster.preempted()` says when the rank has been told to stop, so that
the script saves a checkpoint and exits in time. `ringmaster.checkpoint`
keeps the rank's state of every step in its worker's memory (and a peer's)
and gives it back after a restart (help(ringmaster.checkpoint)).

The worker puts this package on the rank's PYTHONPATH; nothing to install.
Reports go out on a thread of their own, the latest at most twice a second,
so `report` never waits for the network; they are ringmaster.v1 messages
(the generated modules in ringmaster.v1). Outside a Ringmaster job (or
without python3-grpcio and python3-protobuf) it does nothing.
"""
import atexit
import os
import signal
import sys
import threading
import time

from ringmaster.errors import (InvalidSpec, JobFailed, NotFound, PermissionDenied,
                               PlaintextTokenWarning, RingmasterError, Unavailable)

__all__ = ["Client", "RingmasterError", "NotFound", "PermissionDenied", "InvalidSpec",
           "Unavailable", "JobFailed", "PlaintextTokenWarning", "report", "in_job", "preempted"]


def __getattr__(name):
    # The client needs grpc; a rank that only reports does not load it.
    if name == "Client":
        from ringmaster.client import Client
        return Client
    raise AttributeError(f"module 'ringmaster' has no attribute {name!r}")

_INTERVAL_S = 0.5


def in_job():
    """Whether this process is a rank of a Ringmaster job that can report."""
    return bool(os.environ.get("RINGMASTER_JOB_ID") and
                os.environ.get("RINGMASTER_WORKER_ADDRESS"))


_stop_requested = threading.Event()
_stop_lock = threading.Lock()
_stop_watched = False


def _on_sigterm(signum, frame):
    _stop_requested.set()


def preempted():
    """Whether this rank has been told to stop: its job was preempted (by a
    job of higher priority, or a queue taking back its quota), or is being
    stopped for another reason (cancelled, drained, restarted to grow). The
    worker sends SIGTERM, then SIGKILL `preemption_grace_s` later (30 s by
    default); a script that checks this between steps saves a checkpoint and
    exits in time, and its job resumes from that checkpoint.

        for step in range(start, steps):
            train_step()
            if ringmaster.preempted():
                save_checkpoint(step)
                sys.exit(0)

    The first call, from the main thread, installs a SIGTERM handler that
    only records the signal; until then SIGTERM ends the process as usual.
    """
    global _stop_watched
    with _stop_lock:
        if not _stop_watched and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _on_sigterm)
            _stop_watched = True
    return _stop_requested.is_set()


def _rank_progress(job_id, attempt, rank, p):
    """The figures `p` as a ringmaster.v1.RankProgress, serialized."""
    from ringmaster.v1 import worker_pb2
    message = worker_pb2.RankProgress()
    message.rank.job_id = job_id
    message.rank.attempt = attempt
    message.rank.rank = rank
    progress = message.progress
    progress.step = int(p["step"])
    progress.total_steps = int(p["total_steps"])
    progress.epoch = int(p["epoch"])
    progress.loss = float(p["loss"])
    progress.samples_per_second = float(p["samples_per_second"])
    progress.allreduce_bytes = float(p["allreduce_bytes"])
    progress.allreduce_seconds = float(p["allreduce_seconds"])
    progress.update_unix_ms = int(time.time() * 1000)
    progress.samples = int(p["samples"])
    progress.step_seconds.extend(p["step_seconds"])
    progress.world_size = int(p["world_size"])
    progress.backend = p["backend"]
    progress.compute_seconds = float(p["compute_seconds"])
    progress.compute_steps = int(p["compute_steps"])
    progress.resumed_from = p["resumed_from"]
    progress.resumed_step = int(p["resumed_step"])
    return message.SerializeToString()


class _Reporter:
    """The rank's latest figures, sent by a daemon thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._p = {"step": 0, "total_steps": 0, "epoch": 0, "loss": 0.0, "samples": 0,
                   "samples_per_second": 0.0, "allreduce_bytes": 0.0,
                   "allreduce_seconds": 0.0, "step_seconds": [],
                   "compute_seconds": 0.0, "compute_steps": 0,
                   "world_size": int(os.environ.get("WORLD_SIZE", "1")), "backend": "",
                   "resumed_from": "", "resumed_step": 0}
        self._dirty = False
        self._last_step_time = None
        self._send = self._connect()
        self._thread = None
        if self._send is not None:
            self._thread = threading.Thread(target=self._run, name="ringmaster-report",
                                            daemon=True)
            self._thread.start()
            atexit.register(self.flush)

    @staticmethod
    def _connect():
        if not in_job():
            return None
        try:
            import grpc
            from ringmaster.v1 import worker_pb2  # noqa: F401 (python3-protobuf)
        except ImportError:
            print("ringmaster: python3-grpcio or python3-protobuf is not installed; "
                  "progress is not reported", file=sys.stderr)
            return None
        address = os.environ["RINGMASTER_WORKER_ADDRESS"]
        ca = os.environ.get("RINGMASTER_TLS_CA")
        if ca:
            channel = grpc.secure_channel(
                address, grpc.ssl_channel_credentials(root_certificates=ca.encode()),
                options=[("grpc.ssl_target_name_override",
                          os.environ.get("RINGMASTER_WORKER_ID", ""))])
        else:
            channel = grpc.insecure_channel(address)
        call = channel.unary_unary("/ringmaster.v1.WorkerAgentService/ReportProgress")
        token = os.environ.get("RINGMASTER_JOB_TOKEN", "")
        metadata = (("authorization", "Bearer " + token),) if token else ()
        ref = (os.environ["RINGMASTER_JOB_ID"],
               int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
               int(os.environ.get("RANK", "0")))

        def send(p):
            try:
                call(_rank_progress(*ref, p), timeout=2, metadata=metadata)
            except grpc.RpcError:
                pass  # the next report carries the figures again
        return send

    def update(self, step, loss, samples, total_steps, epoch, allreduce_bytes,
               allreduce_seconds, backend, compute_seconds=None):
        now = time.monotonic()
        with self._lock:
            p = self._p
            if step is not None:
                if self._last_step_time is not None and step > p["step"]:
                    p["step_seconds"].append((now - self._last_step_time) / (step - p["step"]))
                    del p["step_seconds"][:-1000]  # a bound while the sender is away
                self._last_step_time = now
                p["step"] = int(step)
            if loss is not None:
                p["loss"] = float(loss)
            if samples is not None:
                p["samples"] += int(samples)
            if total_steps is not None:
                p["total_steps"] = int(total_steps)
            if epoch is not None:
                p["epoch"] = int(epoch)
            if allreduce_bytes is not None:
                p["allreduce_bytes"] += float(allreduce_bytes)
            if allreduce_seconds is not None:
                p["allreduce_seconds"] += float(allreduce_seconds)
            if backend is not None:
                p["backend"] = backend
            if compute_seconds is not None:
                p["compute_seconds"] += float(compute_seconds)
                p["compute_steps"] += 1
            self._dirty = True

    def resumed(self, source, step):
        """Where this rank's state came from ("memory", "replica", "disk"),
        and its step: ringmaster.checkpoint.load()'s."""
        with self._lock:
            self._p["resumed_from"] = source
            self._p["resumed_step"] = int(step)
            self._dirty = True

    def _take(self, rate_from):
        """A copy to send, with the sample rate since `rate_from`."""
        samples0, t0 = rate_from
        now = time.monotonic()
        if now > t0 and self._p["samples"] > samples0:
            self._p["samples_per_second"] = (self._p["samples"] - samples0) / (now - t0)
        p = dict(self._p)
        self._p["step_seconds"] = []
        self._dirty = False
        return p, (p["samples"], now)

    def _run(self):
        rate_from = (0, time.monotonic())
        while True:
            time.sleep(_INTERVAL_S)
            with self._lock:
                if not self._dirty:
                    continue
                p, rate_from = self._take(rate_from)
            self._send(p)

    def flush(self):
        """Sends what has not been sent (at exit)."""
        if self._send is None:
            return
        with self._lock:
            if not self._dirty:
                return
            p = dict(self._p)  # with the last rate measured
            self._p["step_seconds"] = []
            self._dirty = False
        self._send(p)


_reporter = None
_reporter_lock = threading.Lock()


def _get():
    global _reporter
    with _reporter_lock:
        if _reporter is None:
            _reporter = _Reporter()
        return _reporter


def report(step=None, loss=None, samples=None, total_steps=None, epoch=None,
           allreduce_bytes=None, allreduce_seconds=None, backend=None, compute_seconds=None):
    """Records this rank's progress; returns at once.

    step: the optimizer steps done so far; loss: the latest loss;
    samples: samples this rank processed since the last call (its batch);
    total_steps, epoch: where it is; allreduce_bytes, allreduce_seconds:
    added to the totals; compute_seconds: one step's time not spent waiting
    in collectives, from which the coordinator names stragglers
    (ringmaster.torch.instrument reports these three).
    """
    _get().update(step, loss, samples, total_steps, epoch, allreduce_bytes,
                  allreduce_seconds, backend, compute_seconds)
