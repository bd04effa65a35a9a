"""A leader cut off from the network (tests/simulated_hosts.py): a PostgreSQL
on the hosts' bridge, coordinators on host0 and host1 (--lease-timeout 3s),
one-slot workers on host2 to host4. While a 3-rank trainer job runs, the
leader's link goes down: the other coordinator leads within the lease and a
second, and the CLI given both addresses answers. The cut-off leader steps
down on its own once its lease has gone unrenewed; its link back, it is a
standby.

The workers and ranks are given either every coordinator's address, as
deploy/kubernetes/ha gives them the two pods' names, or one name that
resolves to the leader alone, as a Service whose endpoints are its ready
pods would (the hosts' /etc/hosts follows the coordinators' /ready). Given
every address, the job ends with every step, no restart, and each rank
started once. Given one name, a worker waits on the lost leader's address
until its keepalive gives up, the new leader counts it lost, and the job
restarts. Both print their restarts and steps redone.

    bazel test //tests:ha_partition_test
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import simulated_hosts  # noqa: E402
from chaos_cluster import bin_dir, leads, wait_for  # noqa: E402
from simulated_hosts import COORDINATOR_METRICS_PORT, COORDINATOR_PORT, Cluster, Hosts  # noqa: E402

LEASE_S = 3
COORDINATOR_HOSTS = (0, 1)
TRAINER_SPEC = """
name: partitioned
ranks: 3
trainer:
  model: {type: mlp, hidden: [512, 512]}
  data: {path: "synthetic:rows=4000,features=64,classes=4"}
  epochs: 80
  batch_size: 16
"""


# The name a Kubernetes Service gives the coordinators (base/coordinator.yaml).
SERVICE = "ringmaster-coordinator"


class HaCluster(Cluster):
    """Cluster with a coordinator on each of COORDINATOR_HOSTS, on one
    PostgreSQL. Workers and ranks are given every coordinator's address, or
    with `one_name`, SERVICE alone."""

    def __init__(self, hosts, root, store, one_name=False, **kwargs):
        super().__init__(hosts, root, coordinator_host=COORDINATOR_HOSTS[0], **kwargs)
        self.store = store
        self.address = ",".join(f"{hosts.address(h)}:{COORDINATOR_PORT}" for h in COORDINATOR_HOSTS)
        self.given = f"{SERVICE}:{COORDINATOR_PORT}" if one_name else self.address
        self.coordinators = {}

    def workers_reach(self):
        return self.given

    def start_coordinator(self, timeout=60):
        for host in COORDINATOR_HOSTS:
            own = f"{self.hosts.address(host)}:{COORDINATOR_PORT}"
            self.coordinators[host] = self._spawn(host, [
                f"{self.bins}/coordinator/ringmaster-coordinator",
                "--bind", self.hosts.address(host), "--port", str(COORDINATOR_PORT),
                "--metrics-port", str(COORDINATOR_METRICS_PORT), "--metrics-bind",
                self.hosts.address(host), "--advertise-address", own,
                "--peers", self.given,  # what ranks are given
                "--state-dir", os.path.join(self.root, f"coordinator-{host}"),
                "--checkpoint-dir", os.path.join(self.root, "checkpoints"),
                "--tls-dir", self.tls_dir, "--store", self.store,
                "--lease-timeout", f"{LEASE_S}s",
            ], f"coordinator-{host}.log")
        wait_for(lambda: self.cli("workers", check=False).returncode == 0, timeout,
                 "a coordinator answers")

    def stop(self):
        super().stop()
        for proc in self.coordinators.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def ready(self, host):
        """Whether the coordinator on `host` leads (its /ready)."""
        return leads(f"{self.hosts.address(host)}:{COORDINATOR_METRICS_PORT}")

    def leader(self):
        for host in COORDINATOR_HOSTS:
            if self.ready(host):
                return host
        return None


class ServiceName:
    """SERVICE resolves on every host to the coordinators whose /ready
    answers 200, looked at every half second, as a headless Service's
    endpoints follow its pods' readiness."""

    def __init__(self, hosts, cluster):
        self.hosts, self.cluster = hosts, cluster
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._follow, daemon=True)
        self.thread.start()

    def _follow(self):
        named = None
        while not self.stopping.is_set():
            ready = [self.hosts.address(h) for h in COORDINATOR_HOSTS if self.cluster.ready(h)]
            if ready != named:
                self.hosts.name(SERVICE, ready)
                named = ready
            self.stopping.wait(0.5)

    def close(self):
        self.stopping.set()
        self.thread.join()


class HaPartitionTest(unittest.TestCase):
    def setUp(self):
        reason = simulated_hosts.unavailable()
        if reason:
            self.skipTest(reason)
        self.root = tempfile.mkdtemp(prefix="ha-partition-",
                                     dir=os.environ.get("TEST_TMPDIR", "/var/tmp"))
        self.hosts = Hosts(5)
        self.addCleanup(self.hosts.close)
        # PostgreSQL in this process's namespace, on its bridge address.
        self.db = subprocess.Popen([f"{bin_dir()}/testing/postgres_daemon",
                                    self.hosts.local_address],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(self.db.wait, 60)
        self.addCleanup(self.db.stdin.close)
        port = self.db.stdout.readline().strip()
        self.assertTrue(port.isdigit(), "PostgreSQL did not start")
        self.store = f"postgresql://ringmaster@{self.hosts.local_address}:{port}/ringmaster"

    def start_cluster(self, one_name):
        self.cluster = HaCluster(self.hosts, self.root, self.store, one_name=one_name,
                                 worker_hosts=(2, 3, 4), slots=1)
        self.addCleanup(self.cluster.stop)
        if one_name:
            self.addCleanup(ServiceName(self.hosts, self.cluster).close)
        self.cluster.start()
        return self.cluster

    def starts(self, job_id):
        """The workers' records of the job's ranks being started."""
        lines = []
        for host in self.cluster.worker_hosts:
            with open(os.path.join(self.root, "logs", f"worker-{host}.log"), errors="replace") as f:
                lines += [l for l in f if re.search(rf"job {job_id} rank \d+: started pid", l)]
        return lines

    def run(self, result=None):
        # On a failure, the daemons' last lines go with it.
        outcome = super().run(result)
        if result is not None and (result.failures or result.errors):
            for name in sorted(os.listdir(os.path.join(self.root, "logs"))):
                with open(os.path.join(self.root, "logs", name), errors="replace") as f:
                    print(f"==> {name}\n" + "".join(f.readlines()[-40:]))
        return outcome

    def cut_the_leader(self, cluster):
        """Runs the job, cuts the leader's link while it trains, and sees
        the other coordinator lead and the cut-off one come back a standby.
        Returns the job once it ended, and says what it lost."""
        wait_for(lambda: cluster.leader() is not None, 60, "a coordinator leads")
        first = cluster.leader()
        job_id = cluster.submit(TRAINER_SPEC)

        def training():
            # The leader's own view: a standby answers with the stored
            # snapshot, whose progress lags.
            r = subprocess.run([f"{cluster.bins}/client/ringmaster", "--coordinator",
                                f"{self.hosts.address(first)}:{COORDINATOR_PORT}", "--output",
                                "json", "status", job_id],
                               capture_output=True, text=True, env=cluster.env())
            job = json.loads(r.stdout) if r.returncode == 0 else {}
            return (job.get("state") == "RUNNING" and
                    int(job.get("progress", {}).get("step", 0)) > 10)
        wait_for(training, 120, "the job trains")

        self.hosts.cut(first)
        cut = time.monotonic()
        other = [h for h in COORDINATOR_HOSTS if h != first][0]
        wait_for(lambda: cluster.ready(other), 30, "the other coordinator leads")
        took = time.monotonic() - cut
        print(f"the other coordinator led {took:.2f} s after the leader's link was cut "
              f"(lease {LEASE_S} s)")
        self.assertLessEqual(took, LEASE_S + 2)
        # Cut off, the old leader gives up its lease on its own clock.
        log = os.path.join(self.root, "logs", f"coordinator-{first}.log")

        def stepped_down():
            with open(log, errors="replace") as f:
                return "restarting as a standby" in f.read()
        wait_for(stepped_down, LEASE_S + 10, "the cut-off leader steps down")
        # Until the workers' keepalive would have given up on the lost leader.
        wait_for(lambda: time.monotonic() - cut > 40, 60, "40 s after the cut")

        self.hosts.restore(first)
        wait_for(lambda: subprocess.run(
            [f"{cluster.bins}/client/ringmaster", "--coordinator",
             f"{self.hosts.address(first)}:{COORDINATOR_PORT}", "status", job_id],
            capture_output=True, env=cluster.env()).returncode == 0, 60,
            "the old leader answers reads as a standby")
        self.assertFalse(cluster.ready(first), "one leader")
        self.assertTrue(cluster.ready(other))

        job = cluster.wait_job(job_id, lambda j: j.get("state") in
                               ("SUCCEEDED", "FAILED", "CANCELLED"), 600, "ends")
        self.assertEqual(job["state"], "SUCCEEDED", job)
        progress = job.get("progress", {})
        self.assertEqual(progress.get("step"), progress.get("total_steps"), progress)
        lost = job.get("goodput", {}).get("lost_seconds", {})
        print(f"workers given {cluster.given}: {int(job.get('restarts', 0))} restarts, "
              f"{int(job.get('resumed', {}).get('steps_redone', 0))} steps redone, "
              f"{len(self.starts(job_id))} rank starts for 3 ranks, "
              f"{float(lost.get('restart', 0)):.1f} s lost to restarts, "
              f"goodput {float(job.get('goodput', {}).get('ratio', 0)):.3f}")
        return job

    def test_workers_given_every_coordinator_lose_nothing(self):
        cluster = self.start_cluster(one_name=False)
        job = self.cut_the_leader(cluster)
        self.assertEqual(int(job.get("restarts", 0)), 0, job)
        self.assertEqual(int(job.get("attempt", 0)), 0, job)
        self.assertEqual(len(self.starts(job["id"])), 3, self.starts(job["id"]))

    def test_workers_given_one_name_restart_the_job(self):
        cluster = self.start_cluster(one_name=True)
        job = self.cut_the_leader(cluster)
        self.assertGreaterEqual(int(job.get("restarts", 0)), 1, job)
        self.assertGreater(len(self.starts(job["id"])), 3, self.starts(job["id"]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
