"""ringmaster.aio.Client against the real local cluster: the same methods,
errors and resuming as ringmaster.Client, on asyncio."""
import asyncio
import uuid

import pytest

import ringmaster
import ringmaster.aio
from conftest import wait_for
from ringmaster.v1 import job_pb2


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 120))


def test_every_method_on_asyncio(cluster, tmp_path):
    tags = {"test": uuid.uuid4().hex[:12]}
    (tmp_path / "hello.sh").write_text('echo "hello from rank $RANK"\n')

    async def scenario():
        async with ringmaster.aio.Client(cluster.address, tls_dir=cluster.tls_dir) as client:
            assert sorted(w.id for w in await client.workers()) == ["local-0", "local-1"]
            job_id = await client.submit({"name": "aio", "ranks": 2, "labels": tags,
                                          "command": ["sh", "hello.sh"]},
                                         directory=str(tmp_path))
            states = [job.state async for job in client.watch(job_id)]
            assert states[-1] == job_pb2.SUCCEEDED and states[0] in (
                job_pb2.PENDING, job_pb2.STARTING, job_pb2.RUNNING)
            assert (await client.wait(job_id)).state == job_pb2.SUCCEEDED
            lines = sorted([pair async for pair in client.logs(job_id)])
            assert lines == [(0, "hello from rank 0"), (1, "hello from rank 1")]
            assert [pair async for pair in client.logs(job_id, ranks=1, tail=1)] == [
                (1, "hello from rank 1")]
            assert (await client.get(job_id)).spec.code.sha256

            sleeper = await client.submit({"name": "aio-sleeper", "ranks": 1, "labels": tags,
                                           "command": ["sleep", "600"]}, upload=False)
            events = client.watch_jobs(labels=tags)
            seen = {}
            async for event in events:
                seen[event.job.id] = event.job.state
                if seen.get(sleeper) == job_pb2.RUNNING:
                    break
            await events.aclose()
            # The first job, ended, is listed only while it is still held
            # in memory: as it ended, when at all.
            assert seen.get(job_id, job_pb2.SUCCEEDED) == job_pb2.SUCCEEDED
            assert [j.id async for j in client.jobs(labels=tags, page_size=1)] == [sleeper,
                                                                                  job_id]
            assert [j.id async for j in client.jobs(labels=tags, states=["running"])] == [
                sleeper]
            assert (await client.cancel(sleeper)).id == sleeper
            assert (await client.wait(sleeper, timeout=60)).state == job_pb2.CANCELLED

            with pytest.raises(ringmaster.NotFound) as missing:
                await client.get("nope-1")
            assert str(missing.value) == 'no job "nope-1"'
            with pytest.raises(ringmaster.InvalidSpec):
                await client.submit({"name": "x", "ranks": 0, "command": ["true"]},
                                    upload=False)
            failing = await client.submit({
                "name": "aio-raises", "ranks": 1, "restart_policy": "never",
                "command": ["python3", "-c", "raise KeyError('lost')"]}, upload=False)
            with pytest.raises(ringmaster.JobFailed) as failed:
                await client.wait(failing, timeout=60)
            assert failed.value.error == "KeyError: 'lost'"
            with pytest.raises(TimeoutError):
                await client.wait(await client.submit(
                    {"name": "aio-slow", "ranks": 1, "labels": tags, "command": ["sleep", "600"]},
                    upload=False), timeout=1)
            return sleeper

    sleeper = run(scenario())
    with ringmaster.Client(cluster.address, tls_dir=cluster.tls_dir) as sync:
        for job in sync.jobs(labels=tags, states=["pending", "starting", "running"]):
            sync.cancel(job.id)
        wait_for(lambda: sync.delete(sleeper) is None, 30, "the sleeper to be deletable")


def test_aio_logs_follow_through_a_coordinator_restart(cluster):
    async def scenario():
        async with ringmaster.aio.Client(cluster.address, tls_dir=cluster.tls_dir) as client:
            job_id = await client.submit({
                "name": "aio-ticker", "ranks": 1, "restart_policy": "never",
                "command": ["sh", "-c", "for i in $(seq 1 100); do echo $i; sleep 0.05; done"]},
                upload=False)
            lines = []
            async for rank, line in client.logs(job_id, follow=True):
                lines.append(line)
                if len(lines) == 20:
                    await asyncio.get_running_loop().run_in_executor(
                        None, cluster.restart_coordinator)
            assert lines == [str(i) for i in range(1, 101)]
            assert (await client.get(job_id)).attempt == 0

    run(scenario())


def test_every_async_method_has_the_sync_ones_help():
    for name in ("submit", "get", "jobs", "cancel", "hold", "release", "set_priority",
                 "requeue", "delete", "workers", "watch", "watch_jobs", "logs", "wait"):
        assert getattr(ringmaster.aio.Client, name).__doc__ == \
            getattr(ringmaster.Client, name).__doc__, name
