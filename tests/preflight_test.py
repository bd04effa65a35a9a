"""Pre-flight on simulated hosts (tests/simulated_hosts.py): a coordinator on
host0 and one-slot workers on host1 to host4, host2's link throttled to
200 Mbit/s by a token bucket on both of its ends, as a bad NIC or cable
would be. A 3-rank job with `preflight: true` lands on host1-host3 (host4
registers last); its check names host2, the job is placed again on
host1, host3 and host4 without a restart counted, and trains to the end.
Once for the built-in trainer, once for an unmodified PyTorch DDP script,
which gets the check as a prelude of the trainer binary.

    bazel test //tests:preflight_test
"""
import os
import re
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import simulated_hosts  # noqa: E402
from simulated_hosts import Cluster, Hosts  # noqa: E402

SLOW_HOST = 2
ENDED = ("SUCCEEDED", "FAILED", "CANCELLED")
TRAINER_SPEC = """
name: checked
ranks: 3
ranks_per_worker: 1
preflight: true
max_restarts: 0
trainer:
  model: {type: mlp, hidden: [64]}
  data: {path: "synthetic:rows=4000,features=16,classes=4"}
  epochs: 2
  batch_size: 32
"""


class PreflightTest(unittest.TestCase):
    def setUp(self):
        reason = simulated_hosts.unavailable()
        if reason:
            self.skipTest(reason)
        self.root = tempfile.mkdtemp(prefix=f"preflight-{self._testMethodName}-",
                                     dir=os.environ.get("TEST_TMPDIR", "/var/tmp"))
        self.hosts = Hosts(5)
        self.addCleanup(self.hosts.close)
        self.cluster = Cluster(self.hosts, self.root, worker_hosts=(1, 2, 3, 4), slots=1)
        self.addCleanup(self.cluster.stop)
        # Ranks go to workers in the order they registered: the first
        # attempt takes host1-host3, host2 among them.
        self.cluster.start(in_order=True)
        self.hosts.throttle(SLOW_HOST, 200)

    def run_checked(self, spec):
        """Submits `spec` and checks that pre-flight moved it off the slow
        host without counting a restart; returns the ended job and its logs."""
        job_id = self.cluster.submit(spec)
        job = self.cluster.wait_job(job_id, lambda j: j.get("state") in ENDED, 300, "ends")
        logs = self.cluster.logs(job_id)
        self.assertEqual(job["state"], "SUCCEEDED", (job, logs))
        slow = self.cluster.worker_id(SLOW_HOST)
        first = job["past_attempts"][0]
        self.assertIn(slow, first["worker_ids"], "the first attempt ran on the slow host")

        failed = [c for c in job["history"] if c.get("reason") == "PREFLIGHT_FAILED"]
        self.assertEqual(len(failed), 1, job["history"])
        message = failed[0]["message"]
        print(f"pre-flight verdict of attempt 0: {message}")
        self.assertRegex(message, rf"^pre-flight: {slow} \(rank \d: pre-flight bus bandwidth "
                                  r"[0-9.]+ GB/s, under half the job's median [0-9.]+ GB/s\): "
                                  r"placed again without that worker$")
        self.assertEqual(failed[0]["state"], "RESTARTING")
        self.assertEqual(job.get("restarts", 0), 0, "a pre-flight exclusion is not a failure")
        self.assertEqual([e["worker_id"] for e in job["excluded_workers"]], [slow])

        self.assertEqual(job["attempt"], 1)
        self.assertEqual({r["worker_id"] for r in job["ranks"]},
                         {self.cluster.worker_id(h) for h in (1, 3, 4)})
        checked = job["preflight"]
        self.assertEqual(checked["attempt"], 1)
        self.assertTrue(checked["passed"])
        for r in checked["ranks"]:
            print(f"attempt 1, rank {r.get('rank', 0)} on {r['worker_id']}: "
                  f"{r['bus_gb_per_s']:.2f} GB/s with its best peer, "
                  f"{r['world_gb_per_s']:.2f} GB/s across the job")
            self.assertGreater(r["bus_gb_per_s"], 0)
            self.assertEqual(r.get("excluded", ""), "")
        status = self.cluster.cli("status", job_id).stdout
        print("".join(line + "\n" for line in status.splitlines()
                      if line.startswith(("preflight:", "  rank", "avoids:"))))
        self.assertIn("preflight: attempt 1, passed", status)
        self.assertRegex(status, r"avoids:    host2 \(pre-flight: rank \d: pre-flight bus "
                                 r"bandwidth [0-9.]+ GB/s")
        return job, logs

    def test_a_trainer_job_leaves_the_host_with_a_slow_link(self):
        job, logs = self.run_checked(TRAINER_SPEC)
        self.assertEqual(len(re.findall(r"pre-flight: passed", logs)), 3, logs)
        self.assertIn("final: test accuracy", logs)

    def test_a_pytorch_script_gets_the_check_as_a_prelude(self):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_train.py")
        job, logs = self.run_checked(
            f"name: torch-checked\nranks: 3\nranks_per_worker: 1\npreflight: true\n"
            f"max_restarts: 0\ncommand: [/usr/bin/python3, {script}]\n")
        self.assertEqual(len(re.findall(r"pre-flight: passed", logs)), 3, logs)
        for rank in range(3):
            self.assertIn(f"rank {rank}/3 local_rank 0: replicas agree", logs)


if __name__ == "__main__":
    unittest.main()
