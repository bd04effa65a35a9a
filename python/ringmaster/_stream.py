"""What the synchronous and asynchronous clients do alike when a call
fails or a stream breaks: whether and when to make it again, and how to go
on from where it broke without giving anything twice."""
import random
import time
from typing import Callable, Dict, Optional

from ringmaster._connection import Targets
from ringmaster.errors import from_status
from ringmaster.v1 import job_pb2

# A stream broken by these is made again (at the leader, when a standby
# names one); others are the coordinator's answer.
_BROKEN = {"UNAVAILABLE", "CANCELLED"}


class UnaryTries:
    """The tries of one call, within `timeout` seconds: each try's own
    time, and after a failure the pause before the next try at the
    coordinator now current (a standby names the leader; one that is down
    or, for an idempotent call, paused is passed over)."""

    def __init__(self, targets: Targets, timeout: float, idempotent: bool) -> None:
        self._targets = targets
        self._deadline = time.monotonic() + timeout
        self._idempotent = idempotent

    def time_for_try(self) -> float:
        left = max(0.0, self._deadline - time.monotonic())
        return min(left, 3.0) if self._idempotent and self._targets.several else left

    def pause_after(self, code: str, message: str, address: str) -> float:
        """Raises the call's error when it is not to be made again."""
        pause = None
        if time.monotonic() < self._deadline:
            pause = self._targets.follow(code, message, address, self._idempotent)
        if pause is None:
            raise from_status(code, message) from None
        return min(pause, max(0.0, self._deadline - time.monotonic()))


class StreamTries:
    """The tries of one server stream, until it ends: after a break, the
    pause before it is made again, for up to `reconnect_timeout` seconds of
    breaks in a row. `retry_now(code, message)` may take an error as one to
    make the stream again at once (with the request it then gives)."""

    def __init__(self, targets: Targets, method: str, deadline: Optional[float],
                 reconnect_timeout: float,
                 retry_now: Optional[Callable[[str, str], bool]] = None) -> None:
        self._targets = targets
        self._method = method
        self._deadline = deadline
        self._reconnect_timeout = reconnect_timeout
        self._retry_now = retry_now
        self._broken_since: Optional[float] = None

    def timeout(self) -> Optional[float]:
        """The time left for a try (None: no end)."""
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def received(self) -> None:
        self._broken_since = None
        self._targets.answered()

    def pause_after(self, code: str, message: str, address: str) -> float:
        """Raises the stream's error (TimeoutError past the deadline) when
        it is not to be made again."""
        if code == "DEADLINE_EXCEEDED" and self._deadline is not None and \
                time.monotonic() >= self._deadline:
            raise TimeoutError(f"{self._method}: no end within the time given") from None
        if self._retry_now is not None and self._retry_now(code, message):
            return 0.0
        if self._broken_since is None:
            self._broken_since = time.monotonic()
        broken_too_long = time.monotonic() - self._broken_since > self._reconnect_timeout
        if code not in _BROKEN or broken_too_long:
            raise from_status(code, message) from None
        pause = self._targets.follow("UNAVAILABLE", message, address, True)
        if pause is None:  # one coordinator: wait for it to come back
            pause = 0.2 + random.random() * 0.3
        return pause


class RevisionFilter:
    """Tells a job snapshot not given before: revisions grow with every
    change of a job, across coordinator restarts and leader changes."""

    def __init__(self) -> None:
        self._latest: Dict[str, int] = {}

    def new(self, job: job_pb2.Job) -> bool:
        if self._latest.get(job.id, -1) >= job.revision:
            return False
        self._latest[job.id] = job.revision
        return True


class LogResume:
    """Where a StreamLogs stream is, to make it again after a break with
    nothing repeated: each rank's last position (LogChunk.next) in the
    attempt being read, and the bytes received of it since."""

    def __init__(self, request: job_pb2.StreamLogsRequest) -> None:
        self._request = request
        self._attempt: Optional[int] = None
        self._positions: Dict[int, job_pb2.LogPosition] = {}
        self._since: Dict[int, int] = {}  # bytes by rank after its position
        self._skip: Dict[int, int] = {}   # of those, still to drop from a new stream

    def request(self) -> job_pb2.StreamLogsRequest:
        """The request for the next try."""
        request = job_pb2.StreamLogsRequest()
        request.CopyFrom(self._request)
        request.resume.extend(self._positions.values())
        self._skip = dict(self._since)
        return request

    def take(self, chunk: job_pb2.LogChunk) -> bytes:
        """The part of `chunk` not given before."""
        if chunk.attempt != self._attempt:  # on to a later attempt
            self._attempt = chunk.attempt
            self._positions.clear()
            self._since.clear()
            self._skip.clear()
        data = chunk.data
        skip = self._skip.get(chunk.rank, 0)
        if skip:
            dropped = min(skip, len(data))
            self._skip[chunk.rank] = skip - dropped
            data = data[dropped:]
        self._since[chunk.rank] = self._since.get(chunk.rank, 0) + len(data)
        if chunk.HasField("next"):
            self._positions[chunk.rank] = chunk.next
            self._since[chunk.rank] = 0
        return data
