"""ringmaster.Client: Ringmaster's API from Python.

    import ringmaster

    client = ringmaster.Client()          # finds the coordinator as the CLI does
    job_id = client.submit("job.yaml")    # uploads the working directory
    for rank, line in client.logs(job_id, follow=True):
        print(rank, line)
    job = client.wait(job_id)             # raises ringmaster.JobFailed on FAILED

Messages are the generated ringmaster.v1 ones (ringmaster.v1.job_pb2.Job,
...). Calls that only read are made again at the leader, or at the next
coordinator, when one is refused or down; a submit carries a request id, so
making it again is safe. Streams (watch, watch_jobs, logs) go on where they
broke when their coordinator restarts or the leader changes.
"""
import os
import socket
import tempfile
import time
import uuid
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import grpc

from ringmaster import _pack
from ringmaster._connection import Addresses, Connection, Targets, discover
from ringmaster._spec import SpecLike, to_job_spec
from ringmaster._stream import LogResume, RevisionFilter, StreamTries, UnaryTries
from ringmaster.errors import InvalidSpec, JobFailed, from_status
from ringmaster.v1 import cluster_pb2, cluster_pb2_grpc, job_pb2, job_pb2_grpc

__all__ = ["Client", "TERMINAL_STATES"]

TERMINAL_STATES = frozenset({job_pb2.SUCCEEDED, job_pb2.FAILED, job_pb2.CANCELLED})
CHUNK_BYTES = 1 << 20  # of an upload, as the coordinator takes them
UPLOAD_LIMIT_MB = 100  # as the CLI's --upload-limit-mb

States = Iterable[Union[int, str]]
Ranks = Union[int, Sequence[int], None]


def _state_numbers(states: Optional[States]) -> List[int]:
    numbers = []
    for state in states or ():
        if isinstance(state, str):
            try:
                numbers.append(job_pb2.JobState.Value(state.upper()))
            except ValueError:
                raise InvalidSpec(f"state {state}: no such state; one of "
                                  f"{', '.join(job_pb2.JobState.keys()[1:])}") from None
        else:
            numbers.append(int(state))
    return numbers


def reads_its_directory(spec: job_pb2.JobSpec) -> bool:
    """Whether the job runs from its working directory (a command, or a
    trainer reading a relative data path), as the CLI decides."""
    if not spec.HasField("trainer"):
        return True
    path = spec.trainer.data.path
    return not (path == "digits" or path.startswith("synthetic:") or path.startswith("/"))


def prepare_spec(spec: SpecLike, upload: bool,
                 directory: Optional[str]) -> Tuple[job_pb2.JobSpec, Optional[str]]:
    """The JobSpec to submit, and the directory to pack and upload into it
    (None: nothing). A job that runs from its working directory and names
    none gets `directory` (the current one): uploaded, or without `upload`
    named as its working_dir."""
    message = to_job_spec(spec)
    if message.working_dir or message.HasField("code") or not reads_its_directory(message):
        return message, None
    here = os.path.abspath(directory or os.getcwd())
    if upload:
        return message, here
    message.working_dir = here
    return message, None


def code_source(directory: str) -> str:
    """Where an upload was packed, as CodePackage.source shows it."""
    return f"{socket.gethostname()}:{directory}"


def lines_of(data: bytes) -> List[str]:
    """The lines of a log chunk (whole lines, each ending in a newline)."""
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def logs_request(job_id: str, follow: bool, attempt: Optional[int], tail: Optional[int],
                 ranks: Ranks, timestamps: bool) -> Tuple[job_pb2.StreamLogsRequest,
                                                          Optional[frozenset]]:
    """The StreamLogs request of logs(), and the ranks to keep of what it
    streams (None: every one it sends)."""
    request = job_pb2.StreamLogsRequest(job_id=job_id, follow=follow, timestamps=timestamps,
                                        tail_lines=tail or 0)
    if attempt is not None:
        request.attempt = attempt
    if isinstance(ranks, int):
        request.rank = ranks
        return request, None
    request.all_ranks = True
    return request, None if ranks is None else frozenset(ranks)


def stub_for(service: str, channel):
    """The stub of `service` ("jobs" or "cluster") on `channel`."""
    if service == "jobs":
        return job_pb2_grpc.JobServiceStub(channel)
    return cluster_pb2_grpc.ClusterServiceStub(channel)


class Client:
    """A connection to a Ringmaster cluster.

    Client(coordinator=None, tls_dir=None, token=None) finds what the CLI
    finds: `coordinator` ("host:port", "a:7070,b:7070" or a list), else
    $RINGMASTER_COORDINATOR, else 127.0.0.1:7070; `tls_dir`, else
    $RINGMASTER_TLS_DIR, else the files of `ringmaster up` when that local
    cluster's coordinator is the one named ("" speaks plaintext); `token`
    (or `token_file`), else $RINGMASTER_TOKEN. `cert` picks a client
    certificate of the TLS directory (admin's by default, none when a token
    is given). `timeout` bounds each call (s), leader changes included;
    `reconnect_timeout` how long a stream keeps trying to go on after it
    broke. Without TLS, a token goes only to loopback addresses unless
    `insecure` is true or `tls_dir` is "" (then with a
    PlaintextTokenWarning); a standby's redirect is followed only to an
    address given, unless TLS checks the leader named.
    """

    def __init__(self, coordinator: Addresses = None, tls_dir: Optional[str] = None,
                 token: Optional[str] = None, *, token_file: Optional[str] = None,
                 cert: Optional[str] = None, timeout: float = 30.0,
                 reconnect_timeout: float = 60.0, insecure: bool = False) -> None:
        self._connection: Connection = discover(coordinator, tls_dir, token, token_file, cert,
                                                insecure)
        self._targets = Targets(self._connection.addresses, self._connection.tls is not None)
        self._timeout = timeout
        self._reconnect_timeout = reconnect_timeout
        self._channels: Dict[str, grpc.Channel] = {}

    @property
    def addresses(self) -> Tuple[str, ...]:
        """The coordinators this client calls."""
        return self._connection.addresses

    def close(self) -> None:
        """Closes the connections (the client cannot be used after)."""
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # Calls.

    def _stub(self, service: str, address: str):
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = self._connection.channel(address, grpc)
        return stub_for(service, channel)

    def _unary(self, service: str, method: str, request, idempotent: bool = True):
        tries = UnaryTries(self._targets, self._timeout, idempotent)
        while True:
            address = self._targets.current()
            try:
                response = getattr(self._stub(service, address), method)(
                    request, timeout=tries.time_for_try(), metadata=self._connection.metadata())
                self._targets.answered()
                return response
            except grpc.RpcError as e:
                time.sleep(tries.pause_after(e.code().name, e.details() or "", address))

    def _stream(self, method: str, request_of, deadline: Optional[float] = None,
                retry_now=None) -> Iterator:
        """The messages of a server stream, made again where it broke
        (StreamTries): `request_of()` gives the request of each try."""
        tries = StreamTries(self._targets, method, deadline, self._reconnect_timeout, retry_now)
        while True:
            address = self._targets.current()
            call = getattr(self._stub("jobs", address), method)(
                request_of(), timeout=tries.timeout(), metadata=self._connection.metadata())
            try:
                for message in call:
                    tries.received()
                    yield message
                return
            except grpc.RpcError as e:
                time.sleep(tries.pause_after(e.code().name, e.details() or "", address))
            finally:
                call.cancel()

    # Jobs.

    def submit(self, spec: SpecLike, *, upload: bool = True, directory: Optional[str] = None,
               request_id: Optional[str] = None,
               upload_limit_mb: int = UPLOAD_LIMIT_MB) -> str:
        """Submits a job; returns its id.

        `spec` is a ringmaster.v1.JobSpec, a dict of its fields, a YAML or
        JSON document, or a path to one. A job that runs from its working
        directory and names none gets `directory` (the current directory by
        default): packed and uploaded when `upload` (leaving out what its
        .ringmasterignore names, at most `upload_limit_mb` of files), else
        named as the working_dir every host must mount. The submit carries
        `request_id` (made here when None), so a retry never makes two jobs.
        InvalidSpec names what is wrong; nothing is submitted then.
        """
        message, ship = prepare_spec(spec, upload, directory)
        if ship is not None:
            self._ship(ship, upload_limit_mb << 20, message)
        request = job_pb2.SubmitJobRequest(spec=message, request_id=request_id or str(uuid.uuid4()))
        return self._unary("jobs", "SubmitJob", request).job_id

    def _ship(self, directory: str, limit_bytes: int, spec: job_pb2.JobSpec) -> None:
        with tempfile.TemporaryFile(prefix="ringmaster-code.") as archive:
            packed = _pack.pack_directory(directory, limit_bytes, archive)
            self.upload_code(archive, packed.sha256, packed.archive_bytes)
        spec.code.sha256 = packed.sha256
        spec.code.archive_bytes = packed.archive_bytes
        spec.code.source = code_source(directory)

    def upload_code(self, archive, sha256: str, archive_bytes: int) -> bool:
        """Uploads a code archive (an open binary file) unless the
        coordinator has it; True when it had it already."""
        stat = self._unary("jobs", "StatCode", job_pb2.StatCodeRequest(sha256=sha256))
        if stat.stored:
            return True

        def pieces():
            first = job_pb2.UploadCodeRequest(sha256=sha256, archive_bytes=archive_bytes)
            archive.seek(0)
            data = archive.read(CHUNK_BYTES)
            first.data = data
            yield first
            while True:
                data = archive.read(CHUNK_BYTES)
                if not data:
                    return
                yield job_pb2.UploadCodeRequest(data=data)

        address = self._targets.current()
        try:
            response = self._stub("jobs", address).UploadCode(
                pieces(), timeout=max(self._timeout, 600.0), metadata=self._connection.metadata())
        except grpc.RpcError as e:
            raise from_status(e.code().name, e.details() or "") from None
        return response.already_stored

    def get(self, job_id: str) -> job_pb2.Job:
        """The job as it is now (NotFound when there is none)."""
        return self._unary("jobs", "GetJob", job_pb2.GetJobRequest(job_id=job_id))

    def jobs(self, states: Optional[States] = None, labels: Optional[Mapping[str, str]] = None,
             name_prefix: str = "", page_size: int = 100) -> Iterator[job_pb2.Job]:
        """Every job, newest first, fetched a page at a time: only those in
        one of `states` (JobState values or names, "RUNNING"), with every
        one of `labels`, and whose name starts with `name_prefix`."""
        request = job_pb2.ListJobsRequest(page_size=page_size, states=_state_numbers(states),
                                          name_prefix=name_prefix, labels=labels or {})
        while True:
            page = self._unary("jobs", "ListJobs", request)
            yield from page.jobs
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    def progress(self, job_id: str) -> List[job_pb2.ProgressPoint]:
        """The job's progress over its run (at most 512 points, spread over
        it), while the coordinator holds the job in memory."""
        return list(self._unary("jobs", "GetJobProgress",
                                job_pb2.GetJobProgressRequest(job_id=job_id)).points)

    def cancel(self, job_id: str) -> job_pb2.Job:
        """Cancels the job (its ranks are stopped); returns it."""
        return self._unary("jobs", "CancelJob", job_pb2.CancelJobRequest(job_id=job_id),
                           idempotent=False)

    def hold(self, job_id: str) -> job_pb2.Job:
        """Keeps a PENDING job from being scheduled until it is released
        (RingmasterError FAILED_PRECONDITION for a job in another state);
        returns it, `held_by` set."""
        return self._unary("jobs", "HoldJob", job_pb2.HoldJobRequest(job_id=job_id))

    def release(self, job_id: str) -> job_pb2.Job:
        """Lets a held PENDING job be scheduled again; returns it."""
        return self._unary("jobs", "ReleaseJob", job_pb2.ReleaseJobRequest(job_id=job_id))

    def set_priority(self, job_id: str, priority: str) -> job_pb2.Job:
        """Gives a PENDING job another priority: a class of the coordinator's
        queues ("low", "high") or an integer ("500"), as its queue lets its
        owner submit; returns it."""
        return self._unary("jobs", "SetJobPriority",
                           job_pb2.SetJobPriorityRequest(job_id=job_id, priority=priority))

    def requeue(self, job_id: str) -> job_pb2.Job:
        """Runs an ended job again (FAILED, CANCELLED or SUCCEEDED): a new
        attempt of the same job id, under the same uid, resuming from its
        own checkpoints; returns it, PENDING."""
        return self._unary("jobs", "RequeueJob", job_pb2.RequeueJobRequest(job_id=job_id),
                           idempotent=False)

    def delete(self, job_id: str) -> None:
        """Forgets an ended job, its history and its logs (RingmasterError
        FAILED_PRECONDITION while it is active)."""
        self._unary("jobs", "DeleteJob", job_pb2.DeleteJobRequest(job_id=job_id),
                    idempotent=False)

    def workers(self) -> List[cluster_pb2.Worker]:
        """Every worker the coordinator knows, with its slots and health."""
        return list(self._unary("cluster", "ListWorkers", cluster_pb2.ListWorkersRequest()).workers)

    # Streams.

    def watch(self, job_id: str, timeout: Optional[float] = None) -> Iterator[job_pb2.Job]:
        """The job now, then after each change, until it ends. Goes on
        where it broke (a restart, a new leader); a snapshot is given once,
        by its revision. TimeoutError after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        request = job_pb2.WatchJobRequest(job_id=job_id)
        seen = RevisionFilter()
        for event in self._stream("WatchJob", lambda: request, deadline):
            if seen.new(event.job):
                yield event.job

    def watch_jobs(self, labels: Optional[Mapping[str, str]] = None,
                   resume_token: str = "") -> Iterator[job_pb2.JobsEvent]:
        """Events of every job (with every one of `labels`): first each
        job the coordinator holds, then every change, without end. Each
        event's resume_token may be passed back later to go on after it.
        A broken stream (a coordinator restart, a new leader, a reader that
        fell behind) goes on from its last token, with no change lost or
        given twice (by each job's revision)."""
        token = [resume_token]
        seen = RevisionFilter()

        def request():
            return job_pb2.WatchJobsRequest(resume_token=token[0], labels=labels or {})

        def retry_now(code: str, message: str) -> bool:
            if code == "OUT_OF_RANGE" and token[0]:  # not a token of this cluster's
                token[0] = ""
                return True
            return code == "RESOURCE_EXHAUSTED"  # fell behind: on from the token

        for event in self._stream("WatchJobs", request, None, retry_now):
            token[0] = event.resume_token
            if seen.new(event.job):
                yield event

    def logs(self, job_id: str, follow: bool = False, attempt: Optional[int] = None,
             tail: Optional[int] = None, ranks: Ranks = None,
             timestamps: bool = False) -> Iterator[Tuple[int, str]]:
        """The job's output as (rank, line): of `attempt` (default: the
        latest that placed its ranks), of every rank or only `ranks` (one,
        or several), from each rank's last `tail` lines. With `follow`, on
        until the job ends, through its restarts (without `attempt`), and
        through a coordinator restart or a new leader, with no line given
        twice or lost."""
        request, keep = logs_request(job_id, follow, attempt, tail, ranks, timestamps)
        resume = LogResume(request)
        for chunk in self._stream("StreamLogs", resume.request):
            data = resume.take(chunk)
            if keep is not None and chunk.rank not in keep:
                continue
            for line in lines_of(data):
                yield chunk.rank, line

    def wait(self, job_id: str, timeout: Optional[float] = None) -> job_pb2.Job:
        """Waits for the job to end; returns it as it ended. JobFailed
        (with the failing rank's own error) when it FAILED; TimeoutError
        after `timeout` seconds."""
        last = None
        for job in self.watch(job_id, timeout):
            last = job
            if job.state in TERMINAL_STATES:
                break
        if last is None or last.state not in TERMINAL_STATES:
            last = self.get(job_id)
        if last.state == job_pb2.FAILED:
            raise JobFailed(last)
        return last

