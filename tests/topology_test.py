"""Placement that knows the network, on simulated hosts (tests/simulated_hosts.py)
in two racks: rack a has host0 (the coordinator), host1 and host3; rack b
has host2 and host4; the spine between the racks carries 500 Mbit/s (a
token bucket on both of its ends). Workers on host1-host4 are labelled
with their rack, and the coordinator runs with --topology-levels rack,host.
They register in host order, so that placement by registration order alone
would put a 2-rank job on host1 and host2, across the spine.

A 2-rank job with `placement: {pack: rack}` lands in one rack, and its
pre-flight bus bandwidth is at least twice that of the same job forced
across the racks (`spread: rack`); both are printed.

    bazel test //tests:topology_test
"""
import os
import re
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import simulated_hosts  # noqa: E402
from simulated_hosts import Cluster, Hosts  # noqa: E402

RACKS = {"a": (1, 3), "b": (2, 4)}
SPINE_MBIT = 500
ENDED = ("SUCCEEDED", "FAILED", "CANCELLED")
SPEC = """
name: {name}
ranks: 2
ranks_per_worker: 1
preflight: true
max_restarts: 0
placement: {placement}
trainer:
  model: {{type: mlp, hidden: [64]}}
  data: {{path: "synthetic:rows=4000,features=16,classes=4"}}
  epochs: 1
  batch_size: 32
"""


class TopologyTest(unittest.TestCase):
    def setUp(self):
        reason = simulated_hosts.unavailable()
        if reason:
            self.skipTest(reason)
        self.root = tempfile.mkdtemp(prefix=f"topology-{self._testMethodName}-",
                                     dir=os.environ.get("TEST_TMPDIR", "/var/tmp"))
        self.hosts = Hosts(5, racks=[[0, 1, 3], [2, 4]])
        self.addCleanup(self.hosts.close)
        labels = {h: ["--label", f"rack={rack}"] for rack, hosts in RACKS.items() for h in hosts}
        self.cluster = Cluster(self.hosts, self.root, worker_hosts=(1, 2, 3, 4), slots=1,
                               coordinator_flags=["--topology-levels", "rack,host"],
                               flags_of_host=labels)
        self.addCleanup(self.cluster.stop)
        self.cluster.start(in_order=True)
        self.hosts.throttle_spine(SPINE_MBIT)

    def rack_of(self, worker_id):
        for rack, hosts in RACKS.items():
            if worker_id in {self.cluster.worker_id(h) for h in hosts}:
                return rack
        return None

    def run_job(self, name, placement):
        """Runs the 2-rank job to its end; returns it and the bus bandwidth
        its pre-flight measured (the lower of its two ranks')."""
        job_id = self.cluster.submit(SPEC.format(name=name, placement=placement))
        job = self.cluster.wait_job(job_id, lambda j: j.get("state") in ENDED, 300, "ends")
        self.assertEqual(job["state"], "SUCCEEDED", (job, self.cluster.logs(job_id)))
        checked = job["preflight"]
        self.assertTrue(checked["passed"], checked)
        bus = min(r["bus_gb_per_s"] for r in checked["ranks"])
        return job, bus

    def test_a_job_packed_by_rack_lands_in_one_and_all_reduces_faster(self):
        workers = self.cluster.cli("workers").stdout
        self.assertRegex(workers, r"rack=a,host=host1")
        self.assertRegex(workers, r"rack=b,host=host2")

        packed, packed_bus = self.run_job("packed", "{pack: rack}")
        racks = {self.rack_of(r["worker_id"]) for r in packed["ranks"]}
        self.assertEqual(len(racks), 1, packed["ranks"])
        rack = racks.pop()
        self.assertEqual(packed["placed_in"][0], {"level": "rack", "domains": [rack], "ranks": [2]})
        status = self.cluster.cli("status", packed["id"]).stdout
        self.assertRegex(status, rf"placed: +rack {rack} \(2 ranks\); host ")
        scheduled = [c for c in packed["history"] if c.get("reason") == "SCHEDULED"]
        self.assertTrue(scheduled[0]["message"].endswith(f"; in rack {rack}"), scheduled)

        across, across_bus = self.run_job("across", "{spread: rack}")
        self.assertEqual({self.rack_of(r["worker_id"]) for r in across["ranks"]}, {"a", "b"})
        print(f"pre-flight bus bandwidth, 2 ranks: packed in rack {rack}: {packed_bus:.3f} GB/s; "
              f"across the racks ({SPINE_MBIT} Mbit/s spine): {across_bus:.3f} GB/s; "
              f"ratio {packed_bus / across_bus:.1f}x")
        self.assertGreaterEqual(packed_bus, 2 * across_bus)

    def test_a_packed_job_waits_for_a_rack_where_an_unpacked_one_spans(self):
        # One rank busy in each rack: no rack has 2 free slots.
        blocker = self.cluster.submit(
            "name: blocker\nranks: 2\nplacement: {spread: rack}\n"
            "command: [sleep, '300']\n", name="blocker")
        self.cluster.wait_job(blocker, lambda j: j.get("state") == "RUNNING", 60, "runs")
        packed = self.cluster.submit(
            "name: packed\nranks: 2\nplacement: {pack: rack}\ncommand: [sleep, '300']\n",
            name="packed")
        job = self.cluster.wait_job(packed, lambda j: j.get("pending_reason"), 30, "waits")
        self.assertEqual(job["pending_reason"], "no rack with 2 free slots; the largest has 1")
        spans = self.cluster.submit("name: spans\nranks: 2\ncommand: [sleep, '300']\n",
                                    name="spans")
        job = self.cluster.wait_job(spans, lambda j: j.get("state") == "RUNNING", 60, "runs")
        self.assertEqual({self.rack_of(r["worker_id"]) for r in job["ranks"]}, {"a", "b"})
        self.cluster.cli("cancel", spans)
        self.cluster.cli("cancel", blocker)
        job = self.cluster.wait_job(packed, lambda j: j.get("state") == "RUNNING", 60, "runs")
        self.assertEqual(len({self.rack_of(r["worker_id"]) for r in job["ranks"]}), 1, job)
        self.cluster.cli("cancel", packed)

    def test_a_job_no_rack_can_hold_waits_saying_so(self):
        job_id = self.cluster.submit(
            "name: too-big\nranks: 3\nplacement: {pack: rack}\ncommand: [sleep, '1']\n")
        job = self.cluster.wait_job(job_id, lambda j: j.get("pending_reason"), 30, "waits")
        self.assertEqual(job["state"], "PENDING")
        self.assertEqual(job["pending_reason"],
                         "never fits as asked: no rack with 3 free slots; the largest has 2, "
                         "with nothing running (waiting for workers to join)")
        path = os.path.join(self.root, "refused.yaml")
        with open(path, "w") as f:
            f.write("name: refused\nranks: 1\nplacement: {pack: row}\ncommand: [sleep, '1']\n")
        refused = self.cluster.cli("submit", path, check=False)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("placement.pack: \"row\" is not a level of this cluster's "
                      "--topology-levels (rack, host)", refused.stderr)
        self.assertTrue(re.search(r"too-big", self.cluster.cli("jobs").stdout))


if __name__ == "__main__":
    unittest.main()
