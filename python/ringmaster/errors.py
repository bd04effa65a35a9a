"""The errors of ringmaster.Client: each carries the coordinator's message
(str(error)) and its gRPC status code name (`code`). A grpc.RpcError never
reaches the caller.

    RingmasterError           anything the coordinator or the network refused
    ├── NotFound              no such job, rank, attempt or worker
    ├── PermissionDenied      no credential, or one that may not do this
    ├── InvalidSpec           a spec or argument the coordinator (or the
    │                         client, before sending it) refuses
    ├── Unavailable           no coordinator answered in time (down, no leader)
    └── JobFailed             wait(): the job ended FAILED
"""
from typing import Optional

__all__ = ["RingmasterError", "NotFound", "PermissionDenied", "InvalidSpec", "Unavailable",
           "JobFailed"]


class RingmasterError(Exception):
    """A call the coordinator refused, or could not be made.

    `code` is the gRPC status code's name ("FAILED_PRECONDITION", ...), or
    "CLIENT" for what the client refused before sending; `message` is the
    coordinator's own words.
    """

    def __init__(self, message: str, code: str = "UNKNOWN") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class NotFound(RingmasterError):
    """The job, rank, attempt or worker does not exist (NOT_FOUND)."""


class PermissionDenied(RingmasterError):
    """No credential, or one that may not do this (PERMISSION_DENIED,
    UNAUTHENTICATED)."""


class InvalidSpec(RingmasterError):
    """A job spec or argument refused (INVALID_ARGUMENT, ALREADY_EXISTS for
    a request id used with another spec), naming the field."""

    def __init__(self, message: str, code: str = "CLIENT") -> None:
        super().__init__(message, code)


class Unavailable(RingmasterError):
    """No coordinator answered in time: down, unreachable, no leader
    elected yet (UNAVAILABLE, DEADLINE_EXCEEDED)."""


class JobFailed(RingmasterError):
    """The job ended FAILED. `job` is its final ringmaster.v1.Job;
    `root_cause` its Failure (which rank, on which worker, exit code or
    signal); `error` the failing rank's own account when it left one, such
    as the Python exception that ended it ("ValueError: bad input")."""

    def __init__(self, job) -> None:
        cause = job.root_cause
        self.job = job
        self.root_cause = cause
        self.error: Optional[str] = cause.error or None
        why = cause.message or (job.history[-1].message if job.history else "failed")
        known = job.HasField("root_cause") and cause.rank >= 0 and cause.worker_id
        where = f" (rank {cause.rank} on {cause.worker_id})" if known else ""
        text = f"job {job.id} failed at attempt {job.attempt}: {why}{where}"
        if self.error and self.error not in text:
            text += f": {self.error}"
        super().__init__(text, "FAILED")


_BY_CODE = {
    "NOT_FOUND": NotFound,
    "PERMISSION_DENIED": PermissionDenied,
    "UNAUTHENTICATED": PermissionDenied,
    "INVALID_ARGUMENT": InvalidSpec,
    "ALREADY_EXISTS": InvalidSpec,
    "UNAVAILABLE": Unavailable,
    "DEADLINE_EXCEEDED": Unavailable,
}


def from_status(code_name: str, message: str) -> RingmasterError:
    """The error for a gRPC status."""
    return _BY_CODE.get(code_name, RingmasterError)(message, code_name)


class PlaintextTokenWarning(UserWarning):
    """A token is sent without TLS to an address beyond loopback, because
    the caller asked for it (insecure=True, or tls_dir="")."""
