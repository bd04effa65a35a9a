"""ringmaster.aio.Client: ringmaster.Client on asyncio (grpc.aio), with the
same methods, arguments, errors and resuming; the streams are async
iterators.

    import asyncio
    import ringmaster.aio

    async def main():
        async with ringmaster.aio.Client() as client:
            job_id = await client.submit("job.yaml")
            async for rank, line in client.logs(job_id, follow=True):
                print(rank, line)
            job = await client.wait(job_id)

    asyncio.run(main())
"""
import asyncio
import tempfile
import time
import uuid
from typing import AsyncIterator, Dict, List, Mapping, Optional, Tuple

import grpc
import grpc.aio

from ringmaster import _pack
from ringmaster._connection import Addresses, Connection, Targets, discover
from ringmaster._spec import SpecLike
from ringmaster._stream import LogResume, RevisionFilter, StreamTries, UnaryTries
from ringmaster.client import (CHUNK_BYTES, TERMINAL_STATES, UPLOAD_LIMIT_MB, Ranks, States,
                               _state_numbers, code_source, lines_of, logs_request,
                               prepare_spec, stub_for)
from ringmaster.errors import JobFailed, from_status
from ringmaster.v1 import cluster_pb2, job_pb2

__all__ = ["Client"]


class Client:
    """ringmaster.Client on asyncio: see help(ringmaster.Client) for what
    each argument and method does. Make it inside the event loop that uses
    it."""

    def __init__(self, coordinator: Addresses = None, tls_dir: Optional[str] = None,
                 token: Optional[str] = None, *, token_file: Optional[str] = None,
                 cert: Optional[str] = None, timeout: float = 30.0,
                 reconnect_timeout: float = 60.0, insecure: bool = False) -> None:
        self._connection: Connection = discover(coordinator, tls_dir, token, token_file, cert,
                                                insecure)
        self._targets = Targets(self._connection.addresses, self._connection.tls is not None)
        self._timeout = timeout
        self._reconnect_timeout = reconnect_timeout
        self._channels: Dict[str, grpc.aio.Channel] = {}

    @property
    def addresses(self) -> Tuple[str, ...]:
        return self._connection.addresses

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def _stub(self, service: str, address: str):
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = self._connection.channel(address, grpc.aio)
        return stub_for(service, channel)

    async def _unary(self, service: str, method: str, request, idempotent: bool = True):
        tries = UnaryTries(self._targets, self._timeout, idempotent)
        while True:
            address = self._targets.current()
            try:
                response = await getattr(self._stub(service, address), method)(
                    request, timeout=tries.time_for_try(), metadata=self._connection.metadata())
                self._targets.answered()
                return response
            except grpc.aio.AioRpcError as e:
                await asyncio.sleep(tries.pause_after(e.code().name, e.details() or "", address))

    async def _stream(self, method: str, request_of, deadline: Optional[float] = None,
                      retry_now=None) -> AsyncIterator:
        tries = StreamTries(self._targets, method, deadline, self._reconnect_timeout, retry_now)
        while True:
            address = self._targets.current()
            call = getattr(self._stub("jobs", address), method)(
                request_of(), timeout=tries.timeout(), metadata=self._connection.metadata())
            try:
                async for message in call:
                    tries.received()
                    yield message
                return
            except grpc.aio.AioRpcError as e:
                await asyncio.sleep(tries.pause_after(e.code().name, e.details() or "", address))
            finally:
                call.cancel()

    async def submit(self, spec: SpecLike, *, upload: bool = True,
                     directory: Optional[str] = None, request_id: Optional[str] = None,
                     upload_limit_mb: int = UPLOAD_LIMIT_MB) -> str:
        message, ship = prepare_spec(spec, upload, directory)
        if ship is not None:
            await self._ship(ship, upload_limit_mb << 20, message)
        request = job_pb2.SubmitJobRequest(spec=message, request_id=request_id or str(uuid.uuid4()))
        return (await self._unary("jobs", "SubmitJob", request)).job_id

    async def _ship(self, directory: str, limit_bytes: int, spec: job_pb2.JobSpec) -> None:
        with tempfile.TemporaryFile(prefix="ringmaster-code.") as archive:
            # Packing reads the whole tree: off the event loop.
            packed = await asyncio.get_running_loop().run_in_executor(
                None, _pack.pack_directory, directory, limit_bytes, archive)
            await self.upload_code(archive, packed.sha256, packed.archive_bytes)
        spec.code.sha256 = packed.sha256
        spec.code.archive_bytes = packed.archive_bytes
        spec.code.source = code_source(directory)

    async def upload_code(self, archive, sha256: str, archive_bytes: int) -> bool:
        stat = await self._unary("jobs", "StatCode", job_pb2.StatCodeRequest(sha256=sha256))
        if stat.stored:
            return True

        async def pieces():
            archive.seek(0)
            yield job_pb2.UploadCodeRequest(sha256=sha256, archive_bytes=archive_bytes,
                                            data=archive.read(CHUNK_BYTES))
            while True:
                data = archive.read(CHUNK_BYTES)
                if not data:
                    return
                yield job_pb2.UploadCodeRequest(data=data)

        stub = self._stub("jobs", self._targets.current())
        try:
            response = await stub.UploadCode(pieces(), timeout=max(self._timeout, 600.0),
                                             metadata=self._connection.metadata())
        except grpc.aio.AioRpcError as e:
            raise from_status(e.code().name, e.details() or "") from None
        return response.already_stored

    async def get(self, job_id: str) -> job_pb2.Job:
        return await self._unary("jobs", "GetJob", job_pb2.GetJobRequest(job_id=job_id))

    async def jobs(self, states: Optional[States] = None,
                   labels: Optional[Mapping[str, str]] = None, name_prefix: str = "",
                   page_size: int = 100) -> AsyncIterator[job_pb2.Job]:
        request = job_pb2.ListJobsRequest(page_size=page_size, states=_state_numbers(states),
                                          name_prefix=name_prefix, labels=labels or {})
        while True:
            page = await self._unary("jobs", "ListJobs", request)
            for job in page.jobs:
                yield job
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    async def cancel(self, job_id: str) -> job_pb2.Job:
        return await self._unary("jobs", "CancelJob", job_pb2.CancelJobRequest(job_id=job_id),
                                 idempotent=False)

    async def hold(self, job_id: str) -> job_pb2.Job:
        return await self._unary("jobs", "HoldJob", job_pb2.HoldJobRequest(job_id=job_id))

    async def release(self, job_id: str) -> job_pb2.Job:
        return await self._unary("jobs", "ReleaseJob", job_pb2.ReleaseJobRequest(job_id=job_id))

    async def set_priority(self, job_id: str, priority: str) -> job_pb2.Job:
        return await self._unary(
            "jobs", "SetJobPriority",
            job_pb2.SetJobPriorityRequest(job_id=job_id, priority=priority))

    async def requeue(self, job_id: str) -> job_pb2.Job:
        return await self._unary("jobs", "RequeueJob",
                                 job_pb2.RequeueJobRequest(job_id=job_id), idempotent=False)

    async def delete(self, job_id: str) -> None:
        await self._unary("jobs", "DeleteJob", job_pb2.DeleteJobRequest(job_id=job_id),
                          idempotent=False)

    async def workers(self) -> List[cluster_pb2.Worker]:
        response = await self._unary("cluster", "ListWorkers", cluster_pb2.ListWorkersRequest())
        return list(response.workers)

    async def watch(self, job_id: str,
                    timeout: Optional[float] = None) -> AsyncIterator[job_pb2.Job]:
        deadline = None if timeout is None else time.monotonic() + timeout
        request = job_pb2.WatchJobRequest(job_id=job_id)
        seen = RevisionFilter()
        async for event in self._stream("WatchJob", lambda: request, deadline):
            if seen.new(event.job):
                yield event.job

    async def watch_jobs(self, labels: Optional[Mapping[str, str]] = None,
                         resume_token: str = "") -> AsyncIterator[job_pb2.JobsEvent]:
        token = [resume_token]
        seen = RevisionFilter()

        def request():
            return job_pb2.WatchJobsRequest(resume_token=token[0], labels=labels or {})

        def retry_now(code: str, message: str) -> bool:
            if code == "OUT_OF_RANGE" and token[0]:  # not a token of this cluster's
                token[0] = ""
                return True
            return code == "RESOURCE_EXHAUSTED"  # fell behind: on from the token

        async for event in self._stream("WatchJobs", request, None, retry_now):
            token[0] = event.resume_token
            if seen.new(event.job):
                yield event

    async def logs(self, job_id: str, follow: bool = False, attempt: Optional[int] = None,
                   tail: Optional[int] = None, ranks: Ranks = None,
                   timestamps: bool = False) -> AsyncIterator[Tuple[int, str]]:
        request, keep = logs_request(job_id, follow, attempt, tail, ranks, timestamps)
        resume = LogResume(request)
        async for chunk in self._stream("StreamLogs", resume.request):
            data = resume.take(chunk)
            if keep is not None and chunk.rank not in keep:
                continue
            for line in lines_of(data):
                yield chunk.rank, line

    async def wait(self, job_id: str, timeout: Optional[float] = None) -> job_pb2.Job:
        last = None
        jobs = self.watch(job_id, timeout)
        try:
            async for job in jobs:
                last = job
                if job.state in TERMINAL_STATES:
                    break
        finally:
            await jobs.aclose()  # ends the call now, not when collected
        if last is None or last.state not in TERMINAL_STATES:
            last = await self.get(job_id)
        if last.state == job_pb2.FAILED:
            raise JobFailed(last)
        return last


# help(ringmaster.aio.Client.<method>) says what the synchronous one does.
def _share_docs() -> None:
    from ringmaster.client import Client as Sync
    for name in ("submit", "upload_code", "get", "jobs", "cancel", "hold", "release",
                 "set_priority", "requeue", "delete", "workers", "watch", "watch_jobs", "logs",
                 "wait", "close", "addresses"):
        ours, theirs = getattr(Client, name), getattr(Sync, name)
        if getattr(theirs, "__doc__", None):
            try:
                ours.__doc__ = theirs.__doc__
            except AttributeError:  # a property's doc is fixed
                pass


_share_docs()
