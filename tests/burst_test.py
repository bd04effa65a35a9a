"""A burst of short jobs from parallel clients: real daemons (a coordinator
and two two-slot workers on loopback), --jobs one-rank jobs that exit 0 at
once, submitted by --clients clients at the same time.

Every job must end SUCCEEDED, none may be left RUNNING, and every slot must
be free at the end: a rank exit lost between worker and coordinator would
leave its job RUNNING and its slot taken.

    bazel test //tests:burst_test
    /usr/bin/python3 tests/burst_test.py --jobs 10000 --clients 8   (after bazel build //...)
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chaos_cluster import Cluster, state, wait_for  # noqa: E402

ARGS = argparse.Namespace(jobs=400, clients=8)
JOB = "name: burst\nranks: 1\nrestart_policy: never\ncommand: [\"true\"]\n"


class BurstTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="burst-", dir=os.environ.get("TEST_TMPDIR"))
        self.addCleanup(shutil.rmtree, self.root, ignore_errors=True)
        self.cluster = Cluster(self.root, workers=2, slots=2,
                               coordinator_flags=["--heartbeat-interval", "250ms",
                                                  "--retain-finished-jobs",
                                                  str(ARGS.jobs + 100)])
        self.addCleanup(self.cluster.stop)
        self.cluster.start()

    def submit_all(self):
        path = os.path.join(self.root, "job.yaml")
        with open(path, "w") as f:
            f.write(JOB)
        ids, errors = [], []
        lock = threading.Lock()

        def client(n):
            for _ in range(n):
                r = self.cluster.cli("submit", "--no-upload", path, check=False)
                with lock:
                    (ids if r.returncode == 0 else errors).append(
                        r.stdout.strip() if r.returncode == 0 else r.stderr)
        share = [ARGS.jobs // ARGS.clients + (i < ARGS.jobs % ARGS.clients)
                 for i in range(ARGS.clients)]
        threads = [threading.Thread(target=client, args=(n,)) for n in share]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [], "submits refused")
        return ids

    def jobs(self):
        r = self.cluster.cli("--output", "json", "jobs", "--all", check=False, timeout=120)
        return json.loads(r.stdout).get("jobs", []) if r.returncode == 0 else []

    def test_every_job_ends_and_every_slot_is_free(self):
        began = time.monotonic()
        ids = self.submit_all()
        submitted = time.monotonic()
        self.assertEqual(len(ids), ARGS.jobs)
        seen = {}

        def all_ended():
            seen["jobs"] = self.jobs()
            return (len(seen["jobs"]) >= ARGS.jobs and
                    all(state(j) in ("SUCCEEDED", "FAILED", "CANCELLED") for j in seen["jobs"]))
        try:
            wait_for(all_ended, 60 + ARGS.jobs * 0.1, "every job of the burst ended",
                     interval=1)
        except TimeoutError:
            stuck = {j["id"]: state(j) for j in seen.get("jobs", [])
                     if state(j) not in ("SUCCEEDED", "FAILED", "CANCELLED")}
            self.fail(f"{len(stuck)} jobs did not end: {dict(list(stuck.items())[:20])}")
        ended = time.monotonic()
        not_succeeded = {j["id"]: state(j) for j in seen["jobs"] if state(j) != "SUCCEEDED"}
        self.assertEqual(not_succeeded, {})
        self.assertEqual({j["id"] for j in seen["jobs"]} & set(ids), set(ids))
        used = {}

        def slots_free():
            used.update({w["id"]: int(w.get("slots_used", 0)) for w in self.cluster.worker_list()})
            return len(used) == 2 and not any(used.values())
        wait_for(slots_free, 30, f"every slot free (used: {used})")
        print(f"{ARGS.jobs} jobs from {ARGS.clients} clients: submitted in "
              f"{submitted - began:.1f} s, all SUCCEEDED {ended - began:.1f} s after the "
              f"first submit; none left RUNNING; slots used at the end {used}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=ARGS.jobs)
    parser.add_argument("--clients", type=int, default=ARGS.clients)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
