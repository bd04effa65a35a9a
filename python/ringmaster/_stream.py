"""What the synchronous and asynchronous clients do alike when a stream
breaks: whether and when to make it again, and how to go on from where it
broke without giving anything twice."""
import random
import time
from typing import Dict, Optional

from ringmaster._connection import Targets
from ringmaster.v1 import job_pb2

# A stream broken by these is made again (at the leader, when a standby
# names one); others are the coordinator's answer.
_BROKEN = {"UNAVAILABLE", "CANCELLED"}


def stream_pause(targets: Targets, code: str, message: str, used: str, broken_since: float,
                 reconnect_timeout: float) -> Optional[float]:
    """After a stream from `used` broke with `code`: the pause (s) before
    making it again, or None to give up (not a break, or broken too long)."""
    if code not in _BROKEN or time.monotonic() - broken_since > reconnect_timeout:
        return None
    pause = targets.follow("UNAVAILABLE", message, used, True)
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
