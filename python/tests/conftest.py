"""A real local cluster for the client's tests: `ringmaster up` on a free
port, in a state directory of its own, with TLS; stopped after the tests,
whatever their outcome. RINGMASTER_CLI names the CLI (bazel-bin's when
unset)."""
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, timeout: float, what: str):
    """Polls `condition` until it returns something true; fails the test
    after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 (kept for the failure message)
            last_error = e
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout} s waiting for {what} (last error: {last_error})")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


class Cluster:
    """2 workers of 2 slots each and a coordinator, as `ringmaster up`
    starts them."""

    def __init__(self, root: str) -> None:
        self.cli = os.environ.get("RINGMASTER_CLI") or os.path.join(
            REPO, "bazel-bin/client/ringmaster")
        self.state_dir = os.path.join(root, "cluster")
        self.address = f"127.0.0.1:{free_port()}"
        self.tls_dir = os.path.join(self.state_dir, "tls")
        self.extra_pids = []

    def ringmaster(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.cli, "--coordinator", self.address, *args],
                              capture_output=True, text=True, timeout=120)

    def up(self) -> None:
        # As root, ranks would run as a uid per job, which cannot reach the
        # test's files below root's home.
        ranks = ["--rank-user", "root"] if os.geteuid() == 0 else []
        done = self.ringmaster("up", "--workers", "2", "--slots", "2",
                               "--state-dir", self.state_dir, *ranks)
        assert done.returncode == 0, done.stderr

    def down(self) -> None:
        self.ringmaster("down", "--state-dir", self.state_dir)
        for pid in self.extra_pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def coordinator_pid(self) -> int:
        for pid in self.extra_pids[::-1]:
            if alive(pid):
                return pid
        with open(os.path.join(self.state_dir, "cluster")) as f:
            for line in f:
                role, pid = line.split()[:2]
                if role == "coordinator":
                    return int(pid)
        raise AssertionError("no coordinator in the cluster file")

    def restart_coordinator(self) -> None:
        """kill -9 of the coordinator, then the same command again, as a
        supervisor would: its workers and their ranks carry on."""
        pid = self.coordinator_pid()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode() for a in f.read().split(b"\0") if a]
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not alive(pid), 10, "the killed coordinator to go")
        log = open(os.path.join(self.state_dir, "logs", "coordinator-restarted.log"), "ab")
        restarted = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.extra_pids.append(restarted.pid)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    c = Cluster(str(tmp_path_factory.mktemp("ringmaster")))
    try:
        c.up()
        yield c
    finally:
        c.down()


@pytest.fixture
def client(cluster):
    import ringmaster
    with ringmaster.Client(cluster.address, tls_dir=cluster.tls_dir) as c:
        yield c
