"""A Ringmaster cluster of real daemons on loopback for failure tests and
the recovery benchmark: a coordinator and N one-slot workers started here
with chosen flags, so that each can be killed, paused and started again.

Every process is started in a session of its own and all of them (ranks
included, found by the coordinator address in their environment) are
killed by stop(), which a `with` block calls even when the body fails.
"""
import getpass
import json
import os
import re
import signal
import socket
import struct
import subprocess
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, timeout, what, interval=0.05):
    """Polls `condition` until it returns a true value, which is returned;
    raises TimeoutError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(interval)


def leads(metrics_address):
    """Whether the coordinator whose /metrics is at `metrics_address`
    (host:port) leads: its /ready answers 200."""
    try:
        with urllib.request.urlopen(f"http://{metrics_address}/ready", timeout=1) as r:
            return r.status == 200
    except (OSError, ValueError):
        return False


def bin_dir():
    """Where the programs are: the test's runfiles, else bazel-bin."""
    for d in (".", "bazel-bin"):
        if os.path.exists(os.path.join(d, "client/ringmaster")):
            return os.path.abspath(d)
    raise FileNotFoundError("client/ringmaster: build with `bazel build //...`")


def environ_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    env = {}
    for item in raw.split(b"\0"):
        key, _, value = item.partition(b"=")
        if key:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def alive(pid):
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class ClusterQueries:
    """What a test asks a cluster through the CLI, for a class with
    cli(*args, check=...) and worker_id(key)."""

    def wait_workers_alive(self, keys, timeout=30):
        wanted = {self.worker_id(k) for k in keys}
        wait_for(lambda: wanted <= {w["id"] for w in self.worker_list()
                                    if w.get("state") == "WORKER_STATE_ALIVE"},
                 timeout, f"workers {sorted(wanted)} ALIVE")

    def worker_list(self):
        r = self.cli("--output", "json", "workers", check=False)
        return json.loads(r.stdout).get("workers", []) if r.returncode == 0 else []

    def job(self, job_id):
        r = self.cli("--output", "json", "status", job_id, check=False)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def wait_job(self, job_id, condition, timeout, what):
        def check():
            job = self.job(job_id)
            return job if job is not None and condition(job) else None
        return wait_for(check, timeout, f"job {job_id}: {what}")

    def logs(self, job_id, *args):
        """The output of every attempt of the job still kept, in order."""
        job = self.job(job_id)
        out = ""
        for a in range(attempt(job) + 1 if job else 1):
            out += self.cli("logs", job_id, "--attempt", str(a), *args, check=False).stdout
        return out


class Cluster(ClusterQueries):
    def __init__(self, root, workers=3, coordinator_flags=(), worker_flags=(), slots=1,
                 worker_env=None):
        self.root = root
        self.worker_env = dict(worker_env or {})
        self.slots = slots
        self.bins = bin_dir()
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.coordinator_flags = list(coordinator_flags)
        self.worker_flags = list(worker_flags)
        self.workers = workers
        self.coordinator = None
        self.worker_procs = {}
        self.metrics_ports = {}  # of each worker, for /metrics
        os.makedirs(os.path.join(root, "logs"), exist_ok=True)

    # -- daemons ---------------------------------------------------------

    def _spawn(self, argv, log_name, extra_env=None):
        log = open(os.path.join(self.root, "logs", log_name), "ab")
        env = dict(os.environ, RINGMASTER_COORDINATOR=self.address, **(extra_env or {}))
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        log.close()
        return proc

    def start_coordinator(self):
        self.coordinator = self._spawn(
            [f"{self.bins}/coordinator/ringmaster-coordinator", "--bind", "127.0.0.1",
             "--port", str(self.port), "--metrics-port", "0", "--http-port", "0",
             "--state-dir", os.path.join(self.root, "coordinator")] + self.coordinator_flags,
            "coordinator.log")
        wait_for(lambda: self.cli("workers", check=False).returncode == 0, 30,
                 "the coordinator answers")

    def worker_id(self, i):
        return f"chaos-{i}"

    def worker_argv(self, i):
        self.metrics_ports[i] = free_port()
        return [f"{self.bins}/worker/ringmaster-worker", "--coordinator", self.address,
                "--bind", "127.0.0.1", "--port", str(free_port()),
                "--metrics-port", str(self.metrics_ports[i]),
                "--id", self.worker_id(i), "--slots", str(self.slots),
                "--state-dir", os.path.join(self.root, f"worker-{i}"),
                "--trainer-bin", f"{self.bins}/trainer/ringmaster-trainer",
                # Ranks run as whoever runs the suite: the trainer lives in
                # its build tree, which another user may not read.
                "--rank-user", getpass.getuser()] + self.worker_flags

    def start_worker(self, i):
        self.worker_procs[i] = self._spawn(self.worker_argv(i), f"worker-{i}.log",
                                           self.worker_env)

    def start(self):
        self.start_coordinator()
        for i in range(self.workers):
            self.start_worker(i)
        self.wait_workers_alive(range(self.workers))
        return self

    def worker_metric(self, i, name):
        """{labels text: value} of worker i's series `name`; None when its
        /metrics does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_ports[i]}/metrics",
                                        timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return None
        return {m.group(1) or "": float(m.group(2))
                for m in re.finditer(rf"^{name}(\{{[^}}]*\}})? (\S+)$", text, re.M)}

    def worker_index(self, worker_id):
        return int(worker_id.rsplit("-", 1)[1])

    def signal_worker(self, i, sig):
        os.kill(self.worker_procs[i].pid, sig)
        if sig == signal.SIGKILL:
            self.worker_procs[i].wait()

    def worker_pid(self, i):
        return self.worker_procs[i].pid

    def kill_coordinator(self):
        self.coordinator.kill()
        self.coordinator.wait()

    def stop(self):
        procs = list(self.worker_procs.values()) + [self.coordinator]
        for p in procs:
            if p is not None and p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)
                    p.terminate()
                except ProcessLookupError:
                    pass
        for p in procs:
            if p is None:
                continue
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        # Whatever of this cluster is left (ranks, their children) goes too.
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- client ----------------------------------------------------------

    def cli(self, *args, check=True, timeout=60):
        r = subprocess.run([f"{self.bins}/client/ringmaster", "--coordinator", self.address,
                            *args], capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"ringmaster {' '.join(args)}: exit {r.returncode}: {r.stderr}")
        return r

    def submit(self, yaml_text, name="job"):
        path = os.path.join(self.root, f"{name}.yaml")
        with open(path, "w") as f:
            f.write(yaml_text)
        return self.cli("submit", path).stdout.strip()

    # -- processes -------------------------------------------------------

    def processes(self, job_id=None):
        """pids of this cluster's ranks and everything they started (they
        inherit the environment), those of `job_id` only when given."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            env = environ_of(int(entry))
            if not env or env.get("RINGMASTER_COORDINATOR") != self.address:
                continue
            if "RINGMASTER_JOB_ID" not in env:
                continue  # a daemon or a client
            if job_id is None or env["RINGMASTER_JOB_ID"] == job_id:
                if alive(int(entry)):
                    found.append(int(entry))
        return found

    def checkpoint_params(self, job_id, step):
        """The parameters and optimizer state of the job's checkpoint of `step`."""
        return read_checkpoint(os.path.join(self.root, "coordinator", "checkpoints", job_id,
                                            f"step-{step}", "state.bin"))

    def checkpoints(self, job_id):
        """Steps of the job's checkpoints on disk, ascending."""
        d = os.path.join(self.root, "coordinator", "checkpoints", job_id)
        try:
            names = os.listdir(d)
        except OSError:
            return []
        return sorted(int(m.group(1)) for m in map(re.compile(r"^step-(\d+)$").match, names)
                      if m)


def read_checkpoint(path):
    """(parameters, optimizer state) of a trainer checkpoint
    (trainer/checkpoint.h: magic, six 64-bit counters, then the parameters
    and the optimizer state as a 64-bit count and float32s each, then a
    CRC-32), each as the bytes of its float32s."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"RMCKPT02":
        raise ValueError(f"{path}: not a format-02 checkpoint")
    out, at = [], 8 + 6 * 8
    for _ in range(2):
        (count,) = struct.unpack_from("<Q", data, at)
        out.append(data[at + 8:at + 8 + 4 * count])
        at += 8 + 4 * count
    return tuple(out)


def state(job):
    return job.get("state", "")


def attempt(job):
    return int(job.get("attempt", 0))


def step(job):
    return int(job.get("progress", {}).get("step", 0))


def history_reasons(job):
    return [h.get("reason", "") for h in job.get("history", [])]
