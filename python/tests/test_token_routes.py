"""Where the Python client sends a token. A fake coordinator records the
authorization of each call: over plaintext, a token goes beyond loopback
only when the caller says so (insecure=True, or tls_dir=""), with a
warning; a standby's "the leader is at X" is followed with the token only
to an address the caller gave. As tests/token_routes_test.cc for the CLI."""
import socket
import warnings
from concurrent import futures

import grpc
import pytest

import ringmaster
from ringmaster.v1 import job_pb2

TOKEN = "rmu.bob.6f1b2d0c"


class Recorder(grpc.GenericRpcHandler):
    """ListJobs of ringmaster.v1.JobService: records the authorization,
    answers empty, or as a standby naming `leader`."""

    def __init__(self, host: str, leader: str = "") -> None:
        self.seen = []
        self.leader = leader
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.server.add_generic_rpc_handlers((self,))
        port = self.server.add_insecure_port(f"{host}:0")
        self.address = f"{host}:{port}"
        self.server.start()

    def service(self, details):
        if details.method != "/ringmaster.v1.JobService/ListJobs":
            return None

        def list_jobs(request, context):
            self.seen.append(dict(context.invocation_metadata()).get("authorization", "(none)"))
            if self.leader:
                context.abort(grpc.StatusCode.UNAVAILABLE,
                              "not the leader: the leader is at " + self.leader)
            return job_pb2.ListJobsResponse()

        return grpc.unary_unary_rpc_method_handler(
            list_jobs, request_deserializer=job_pb2.ListJobsRequest.FromString,
            response_serializer=job_pb2.ListJobsResponse.SerializeToString)

    def stop(self) -> None:
        self.server.stop(None)


@pytest.fixture
def recorders():
    made = []

    def make(host: str, leader: str = "") -> Recorder:
        made.append(Recorder(host, leader))
        return made[-1]

    yield make
    for r in made:
        r.stop()


def address_beyond_loopback() -> str:
    """This machine's address toward the outside ("" when it has none)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.254", 9))  # no packet is sent
            host = s.getsockname()[0]
        except OSError:
            return ""
    return "" if host.startswith("127.") else host


@pytest.fixture(autouse=True)
def no_local_cluster(monkeypatch, tmp_path):
    monkeypatch.setenv("RINGMASTER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("RINGMASTER_TLS_DIR", raising=False)
    monkeypatch.delenv("RINGMASTER_TOKEN", raising=False)


def test_a_plaintext_token_goes_beyond_loopback_only_when_asked(recorders):
    host = address_beyond_loopback()
    if not host:
        pytest.skip("this machine has no IPv4 address beyond loopback")
    remote = recorders(host)
    with pytest.raises(ringmaster.PermissionDenied) as refused:
        ringmaster.Client(remote.address, token=TOKEN)
    assert f"not sending the token in plaintext to {remote.address}, beyond loopback" in str(
        refused.value)
    assert remote.seen == []
    for asked in ({"insecure": True}, {"tls_dir": ""}):
        with pytest.warns(ringmaster.PlaintextTokenWarning, match="goes in plaintext to"):
            client = ringmaster.Client(remote.address, token=TOKEN, timeout=5, **asked)
        assert list(client.jobs()) == []
        client.close()
    assert remote.seen == ["Bearer " + TOKEN] * 2


def test_a_name_that_looks_like_loopback_is_not_loopback():
    with pytest.raises(ringmaster.PermissionDenied, match="not sending the token in plaintext"):
        ringmaster.Client("127.0.0.1.example.invalid:7070", token=TOKEN)


def test_a_loopback_coordinator_takes_a_plaintext_token_without_a_word(recorders):
    local = recorders("127.0.0.1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        client = ringmaster.Client(local.address, token=TOKEN, timeout=5)
    assert list(client.jobs()) == []
    client.close()
    assert local.seen == ["Bearer " + TOKEN]


def test_a_standbys_redirect_is_followed_only_to_an_address_given(recorders):
    elsewhere = recorders("127.0.0.1")
    standby = recorders("127.0.0.1", leader=elsewhere.address)
    client = ringmaster.Client(standby.address, token=TOKEN, timeout=3)
    with pytest.raises(ringmaster.Unavailable, match="the leader is at " + elsewhere.address):
        list(client.jobs())
    client.close()
    assert elsewhere.seen == [], "the token followed the redirect"
    listed = ringmaster.Client([standby.address, elsewhere.address], token=TOKEN, timeout=5)
    assert list(listed.jobs()) == []
    listed.close()
    assert elsewhere.seen == ["Bearer " + TOKEN]


async def _aio_jobs(client):
    return [job async for job in client.jobs()]


def test_the_asyncio_client_keeps_to_the_same_rules(recorders):
    import asyncio

    import ringmaster.aio

    elsewhere = recorders("127.0.0.1")
    standby = recorders("127.0.0.1", leader=elsewhere.address)

    async def run():
        client = ringmaster.aio.Client(standby.address, token=TOKEN, timeout=3)
        with pytest.raises(ringmaster.Unavailable):
            await _aio_jobs(client)
        await client.close()

    asyncio.run(run())
    assert elsewhere.seen == []
    host = address_beyond_loopback()
    if host:
        with pytest.raises(ringmaster.PermissionDenied):
            ringmaster.aio.Client(f"{host}:1", token=TOKEN)
