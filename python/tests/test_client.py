"""ringmaster.Client against a real local cluster (conftest.py)."""
import collections
import json
import threading
import time
import uuid

import grpc
import pytest

import ringmaster
from conftest import free_port, wait_for
from ringmaster.v1 import job_pb2


def label() -> dict:
    return {"test": uuid.uuid4().hex[:12]}


def command_job(name, command, ranks=1, **fields) -> dict:
    return {"name": name, "ranks": ranks, "command": ["sh", "-c", command],
            "restart_policy": "never", **fields}


def test_finds_the_local_cluster_as_the_cli_does(cluster, monkeypatch):
    monkeypatch.setenv("RINGMASTER_COORDINATOR", cluster.address)
    monkeypatch.setenv("RINGMASTER_STATE_DIR", cluster.state_dir)
    monkeypatch.delenv("RINGMASTER_TLS_DIR", raising=False)
    monkeypatch.delenv("RINGMASTER_TOKEN", raising=False)
    with ringmaster.Client() as client:
        assert client.addresses == (cluster.address,)
        assert sorted(w.id for w in client.workers()) == ["local-0", "local-1"]
    # RINGMASTER_TLS_DIR="" speaks plaintext, which this cluster refuses.
    monkeypatch.setenv("RINGMASTER_TLS_DIR", "")
    with ringmaster.Client(timeout=3) as plaintext:
        with pytest.raises(ringmaster.Unavailable):
            plaintext.workers()


def test_several_addresses_pass_over_one_that_is_down(cluster):
    down = f"127.0.0.1:{free_port()}"
    with ringmaster.Client(f"{down},{cluster.address}", tls_dir=cluster.tls_dir) as client:
        assert client.addresses == (down, cluster.address)
        assert len(client.workers()) == 2
    with ringmaster.Client([down, cluster.address], tls_dir=cluster.tls_dir) as client:
        assert len(client.workers()) == 2


def test_every_worker_with_its_slots(client):
    workers = client.workers()
    assert sorted(w.id for w in workers) == ["local-0", "local-1"]
    assert all(w.slots == 2 for w in workers)


def test_a_spec_as_a_dict_yaml_json_path_or_message(client, tmp_path):
    tags = label()
    yaml_text = f"name: as-yaml\nranks: 1\ncommand: [true]\nlabels: {json.dumps(tags)}\n"
    path = tmp_path / "job.yaml"
    path.write_text(yaml_text.replace("as-yaml", "as-path"))
    message = job_pb2.JobSpec(name="as-message", ranks=1, command=["true"], labels=tags)
    ids = [
        client.submit({"name": "as-dict", "ranks": 1, "command": ["true"], "labels": tags},
                      upload=False),
        client.submit(yaml_text, upload=False),
        client.submit(json.dumps({"name": "as-json", "ranks": 1, "command": ["true"],
                                  "labels": tags}), upload=False),
        client.submit(str(path), upload=False),
        client.submit(path, upload=False),
        client.submit(message, upload=False),
    ]
    names = [client.get(i).spec.name for i in ids]
    assert names == ["as-dict", "as-yaml", "as-json", "as-path", "as-path", "as-message"]
    for job_id in ids:
        assert client.wait(job_id, timeout=60).state == job_pb2.SUCCEEDED


def test_a_retried_submit_is_the_same_job(client):
    spec = command_job("retried", "true")
    first = client.submit(spec, upload=False)  # a request id of its own
    request_id = "retry-" + uuid.uuid4().hex
    one = client.submit(spec, upload=False, request_id=request_id)
    two = client.submit(spec, upload=False, request_id=request_id)
    assert one == two != first
    with pytest.raises(ringmaster.InvalidSpec) as refused:
        client.submit(command_job("other", "true"), upload=False, request_id=request_id)
    assert refused.value.code == "ALREADY_EXISTS"
    assert request_id in str(refused.value)


def test_a_bad_spec_names_the_field_and_submits_nothing(client, tmp_path):
    tags = label()
    cases = [
        ({"name": "x", "ranks": "two", "labels": tags}, 'ranks: expected an integer, got "two"'),
        ({"name": "x", "ranks": 1, "trainer": {"optimiser": {}}}, "trainer.optimiser: unknown field"),
        ("name: x\nranks: 1\nname: y\n", "line 3, column 1: name: duplicate key (first at line 1)"),
        ("name: x\nranks: [1\n", "line 3, column 1"),
        (str(tmp_path / "missing.yaml"), "cannot read " + str(tmp_path / "missing.yaml")),
    ]
    for spec, message in cases:
        with pytest.raises(ringmaster.InvalidSpec) as refused:
            client.submit(spec, upload=False)
        assert message in str(refused.value), spec
        assert refused.value.code == "CLIENT"
    # The coordinator's own check: its code and message come through.
    with pytest.raises(ringmaster.InvalidSpec) as refused:
        client.submit({"name": "x", "ranks": 0, "command": ["true"], "labels": tags},
                      upload=False)
    assert refused.value.code == "INVALID_ARGUMENT"
    assert "ranks: must be in [1, 4096], got 0" in str(refused.value)
    assert list(client.jobs(labels=tags)) == []


def test_upload_from_a_temporary_directory(client, tmp_path):
    code = tmp_path / "code"
    (code / "pkg").mkdir(parents=True)
    (code / "pkg" / "data.txt").write_text("payload\n")
    (code / "run.sh").write_text("#!/bin/sh\nfind . -type f | sort\ncat pkg/data.txt\n")
    (code / "run.sh").chmod(0o755)
    (code / "big.ckpt").write_bytes(b"\0" * 1000)
    (code / "cache").mkdir()
    (code / "cache" / "x").write_text("x")
    (code / ".ringmasterignore").write_text("*.ckpt\ncache/\n")
    job_id = client.submit({"name": "uploaded", "ranks": 1, "command": ["./run.sh"]},
                           directory=str(code))
    job = client.get(job_id)
    assert len(job.spec.code.sha256) == 64 and job.spec.code.archive_bytes > 0
    assert job.spec.code.source.endswith(":" + str(code))
    assert client.wait(job_id, timeout=60).state == job_pb2.SUCCEEDED
    lines = [line for _, line in client.logs(job_id)]
    assert lines == ["./.ringmasterignore", "./pkg/data.txt", "./run.sh", "payload"]
    # The same tree again: the coordinator has it, and it is not sent.
    again = client.submit({"name": "uploaded", "ranks": 1, "command": ["./run.sh"]},
                          directory=str(code))
    assert client.get(again).spec.code.sha256 == job.spec.code.sha256


def test_an_upload_over_the_limit_names_the_largest(client, tmp_path):
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "w.bin").write_bytes(b"\1" * (2 << 20))
    with pytest.raises(ringmaster.InvalidSpec) as refused:
        client.submit({"name": "big", "ranks": 1, "command": ["true"]},
                      directory=str(tmp_path), upload_limit_mb=1)
    assert "holds 2.0 MiB to upload, more than the 1.0 MiB limit" in str(refused.value)
    assert "weights/ 2.0 MiB" in str(refused.value)


def test_jobs_pages_filters_cancel_and_delete(client):
    tags = label()
    ids = [client.submit(command_job(f"paged-{i}", "true", labels=tags), upload=False)
           for i in range(5)]
    for job_id in ids:
        client.wait(job_id, timeout=60)
    assert [j.id for j in client.jobs(labels=tags, page_size=2)] == ids[::-1]
    sleeper = client.submit(command_job("sleeper", "sleep 600", labels=tags), upload=False)
    wait_for(lambda: client.get(sleeper).state == job_pb2.RUNNING, 60, "the sleeper to run")
    assert [j.id for j in client.jobs(states=["running"], labels=tags)] == [sleeper]
    assert [j.id for j in client.jobs(states=[job_pb2.RUNNING], labels=tags)] == [sleeper]
    assert [j.id for j in client.jobs(labels=tags, name_prefix="paged-3")] == [ids[3]]
    with pytest.raises(ringmaster.InvalidSpec) as refused:
        list(client.jobs(states=["sleeping"]))
    assert "state sleeping: no such state" in str(refused.value)
    with pytest.raises(ringmaster.RingmasterError) as active:
        client.delete(sleeper)
    assert active.value.code == "FAILED_PRECONDITION"
    assert client.cancel(sleeper).id == sleeper
    assert client.wait(sleeper, timeout=60).state == job_pb2.CANCELLED
    # Deleted once its ranks have stopped (FAILED_PRECONDITION until then).
    wait_for(lambda: client.delete(sleeper) is None, 30, "the sleeper to be deletable")
    with pytest.raises(ringmaster.NotFound) as gone:
        client.get(sleeper)
    assert str(gone.value) == f'no job "{sleeper}"'
    assert gone.value.code == "NOT_FOUND"


def test_hold_release_set_priority_and_requeue(client):
    # 5 ranks never fit on 4 slots: the job stays PENDING.
    waiting = client.submit(command_job("too-big", "true", ranks=5), upload=False)
    held = client.hold(waiting)
    assert held.held_by == "admin"
    assert held.pending_reason.startswith("held by admin")
    assert client.set_priority(waiting, "high").priority == 1000
    with pytest.raises(ringmaster.InvalidSpec) as unknown:
        client.set_priority(waiting, "urgent")
    assert "urgent" in str(unknown.value)
    assert client.release(waiting).held_by == ""
    client.cancel(waiting)
    done = client.submit(command_job("twice", "echo ran"), upload=False)
    assert client.wait(done, timeout=60).state == job_pb2.SUCCEEDED
    with pytest.raises(ringmaster.RingmasterError) as pending_only:
        client.hold(done)
    assert pending_only.value.code == "FAILED_PRECONDITION"
    wait_for(lambda: client.requeue(done).attempt == 1, 30, "the job to be requeued")
    again = client.wait(done, timeout=60)
    assert (again.state, again.attempt) == (job_pb2.SUCCEEDED, 1)


def test_errors_carry_the_coordinators_words_and_no_grpc_error_escapes(cluster, client):
    calls = [
        (lambda: client.get("nope-1"), ringmaster.NotFound, 'no job "nope-1"'),
        (lambda: client.cancel("nope-1"), ringmaster.NotFound, 'no job "nope-1"'),
        (lambda: list(client.logs("nope-1")), ringmaster.NotFound, 'no job "nope-1"'),
        (lambda: list(client.watch("nope-1")), ringmaster.NotFound, 'no job "nope-1"'),
        (lambda: client.get("../etc"), ringmaster.InvalidSpec, "job id"),
    ]
    for call, kind, words in calls:
        with pytest.raises(ringmaster.RingmasterError) as raised:
            call()
        assert type(raised.value) is kind, raised.value
        assert words in str(raised.value)
        assert not isinstance(raised.value, grpc.RpcError)
    # A token the cluster never issued, presented with no certificate.
    with ringmaster.Client(cluster.address, tls_dir=cluster.tls_dir, token="forged") as forged:
        with pytest.raises(ringmaster.PermissionDenied) as denied:
            forged.workers()
        assert denied.value.code in ("UNAUTHENTICATED", "PERMISSION_DENIED")
        assert str(denied.value)
    with ringmaster.Client(f"127.0.0.1:{free_port()}", tls_dir="", timeout=2) as nowhere:
        started = time.monotonic()
        with pytest.raises(ringmaster.Unavailable) as unavailable:
            nowhere.get("a-1")
        assert unavailable.value.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED")
        assert time.monotonic() - started < 10


def test_wait_raises_job_failed_with_the_ranks_python_exception(client):
    job_id = client.submit({
        "name": "raises", "ranks": 2, "restart_policy": "never",
        "command": ["python3", "-c",
                    "import os, time\n"
                    "if os.environ['RANK'] == '1':\n"
                    "    raise ValueError('bad input on rank 1')\n"
                    "time.sleep(30)\n"],
    }, upload=False)
    with pytest.raises(ringmaster.JobFailed) as failed:
        client.wait(job_id, timeout=60)
    error = failed.value
    assert error.error == "ValueError: bad input on rank 1"
    assert error.root_cause.rank == 1
    assert error.job.state == job_pb2.FAILED and error.job.id == job_id
    assert "ValueError: bad input on rank 1" in str(error)
    assert isinstance(error, ringmaster.RingmasterError)


def test_wait_times_out(client):
    job_id = client.submit(command_job("slow", "sleep 600"), upload=False)
    try:
        with pytest.raises(TimeoutError):
            client.wait(job_id, timeout=1)
    finally:
        client.cancel(job_id)


def test_logs_of_ranks_tail_and_attempt(client):
    job_id = client.submit(command_job("talk", 'for i in 1 2 3 4; do echo "r$RANK l$i"; done',
                                       ranks=2), upload=False)
    client.wait(job_id, timeout=60)
    every = list(client.logs(job_id))
    assert sorted(every) == sorted((r, f"r{r} l{i}") for r in (0, 1) for i in (1, 2, 3, 4))
    assert list(client.logs(job_id, ranks=1)) == [(1, f"r1 l{i}") for i in (1, 2, 3, 4)]
    assert sorted(client.logs(job_id, ranks=[0, 1], tail=1)) == [(0, "r0 l4"), (1, "r1 l4")]
    assert list(client.logs(job_id, attempt=0, ranks=0)) == [(0, f"r0 l{i}") for i in (1, 2, 3, 4)]
    stamped = list(client.logs(job_id, ranks=0, tail=1, timestamps=True))
    assert len(stamped) == 1 and stamped[0][1].endswith("r0 l4") and stamped[0][1][:4].isdigit()
    with pytest.raises(ringmaster.NotFound):
        list(client.logs(job_id, ranks=5))


def test_watch_jobs_survives_a_coordinator_restart_with_no_event_lost_or_repeated(
        cluster, client):
    tags = label()
    first = client.submit(command_job("before", "sleep 600", labels=tags), upload=False)
    events = []
    watching = ringmaster.Client(cluster.address, tls_dir=cluster.tls_dir)

    def follow():
        try:
            for event in watching.watch_jobs(labels=tags):
                events.append(event.job)
        except ringmaster.RingmasterError:
            pass  # closed at the end of the test

    def latest(job_id):
        return max((j.revision for j in events if j.id == job_id), default=0)

    # The single-job watch of wait() goes through the restart too.
    waited = {}
    threading.Thread(target=follow, daemon=True).start()
    waiter = threading.Thread(target=lambda: waited.update(job=client.wait(first, timeout=120)),
                              daemon=True)
    waiter.start()
    try:
        wait_for(lambda: any(j.state == job_pb2.RUNNING for j in events), 60, "RUNNING")
        cluster.restart_coordinator()
        wait_for(lambda: client.get(first).state == job_pb2.RUNNING, 60, "the coordinator back")
        second = client.submit(command_job("after", "true", labels=tags), upload=False)
        client.cancel(first)
        waiter.join(60)
        assert waited["job"].state == job_pb2.CANCELLED
        # Once the stream has given the last change of `second`, it is
        # live: a job submitted now is seen at every change.
        client.wait(second, timeout=60)
        wait_for(lambda: latest(second) == client.get(second).revision, 60, "second's last")
        third = client.submit(command_job("live", "true", labels=tags), upload=False)
        client.wait(third, timeout=60)
        jobs = (first, second, third)
        wait_for(lambda: all(latest(j) == client.get(j).revision for j in jobs), 60,
                 "the last change of every job")
    finally:
        watching.close()

    for job_id in jobs:
        revisions = [j.revision for j in events if j.id == job_id]
        assert revisions == sorted(set(revisions)), f"{job_id}: given twice: {revisions}"
    assert [j.id for j in events if j.id not in jobs] == []
    states = [j.state for j in events if j.id == third]
    changes = [h.state for h in client.get(third).history]
    assert [s for i, s in enumerate(states) if i == 0 or states[i - 1] != s] == changes
    assert [j.state for j in events if j.id == first][-1] == job_pb2.CANCELLED
    assert client.get(first).attempt == 0, "the ranks ran on through the restart"


def test_logs_follow_a_job_through_a_coordinator_restart(cluster, client):
    lines_per_rank = 150
    job_id = client.submit(command_job(
        "ticker", f'for i in $(seq 1 {lines_per_rank}); do echo "r$RANK $i"; sleep 0.05; done',
        ranks=2), upload=False)
    received = []
    reader = threading.Thread(
        target=lambda: received.extend(client.logs(job_id, follow=True)), daemon=True)
    reader.start()
    wait_for(lambda: len(received) >= 40, 60, "40 lines")
    cluster.restart_coordinator()
    reader.join(120)
    assert not reader.is_alive(), "logs(follow=True) did not end with the job"
    job = client.get(job_id)
    assert job.state == job_pb2.SUCCEEDED and job.attempt == 0
    for rank in (0, 1):
        mine = [line for r, line in received if r == rank]
        assert mine == [f"r{rank} {i}" for i in range(1, lines_per_rank + 1)], \
            f"rank {rank}: {len(mine)} lines"


def test_every_method_has_its_help_and_type_hints():
    import typing
    for name in ("submit", "get", "jobs", "cancel", "hold", "release", "set_priority",
                 "requeue", "delete", "workers", "watch", "watch_jobs", "logs", "wait"):
        method = getattr(ringmaster.Client, name)
        assert method.__doc__ and len(method.__doc__) > 40, name
        assert "return" in typing.get_type_hints(method), name
    assert "RINGMASTER_COORDINATOR" in ringmaster.Client.__doc__
