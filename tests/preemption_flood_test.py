"""A flood of short jobs in one queue and a borrower from another, on real
daemons (a coordinator with queues and two one-slot workers on loopback):
the preemption loop of a borrower placed in every slot a short job frees
and preempted again at the next pass.

Queue `team` is entitled to both slots; queue `other` to none, so its job
borrows. The borrower runs past --min-runtime, then a flood of one-rank
jobs comes to `team`. The borrower must be taken back once, wait as
`would borrow, while a job within its queue's quota waits for slots` while
the flood lasts, and run again after it; every job of the flood succeeds.

    bazel test //tests:preemption_flood_test
    /usr/bin/python3 tests/preemption_flood_test.py   (after bazel build //...)
"""
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

QUEUES = """queues:
  - name: team
    quota: {slots: 2}
  - name: other
    quota: {slots: 0}
    limit: {slots: 2}
default_queue: team
"""
FLOOD = 40
SHORT = "name: short\nranks: 1\nqueue: team\nrestart_policy: never\ncommand: [sleep, '0.3']\n"
BORROWER = "name: borrower\nranks: 1\nqueue: other\ncommand: [sleep, '600']\n"
ENDED = ("SUCCEEDED", "FAILED", "CANCELLED")


class PreemptionFloodTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="flood-", dir=os.environ.get("TEST_TMPDIR"))
        self.addCleanup(shutil.rmtree, self.root, ignore_errors=True)
        queues = os.path.join(self.root, "queues.yaml")
        with open(queues, "w") as f:
            f.write(QUEUES)
        self.cluster = Cluster(self.root, workers=2, slots=1, coordinator_flags=[
            "--queues", queues, "--min-runtime", "3s", "--heartbeat-interval", "250ms",
            "--retain-finished-jobs", str(FLOOD + 50)])
        self.addCleanup(self.cluster.stop)
        self.cluster.start()

    def submit(self, text, name):
        return self.cluster.submit(text, name)

    def test_a_flood_takes_the_borrowers_slot_back_once(self):
        c = self.cluster
        borrower = self.submit(BORROWER, "borrower")
        started = c.wait_job(borrower, lambda j: state(j) == "RUNNING", 60, "the borrower runs")
        # Past --min-runtime: the flood may take back what it borrowed.
        wait_for(lambda: time.time() * 1000 - float(started["history"][-1]["time_unix_ms"]) > 3500,
                 30, "the borrower past --min-runtime", interval=0.2)

        ids, errors, reasons = [], [], set()
        lock = threading.Lock()
        flooding = threading.Event()
        flooding.set()

        def flood(n):
            for _ in range(n):
                r = c.cli("submit", "--no-upload", self.short_file, check=False)
                with lock:
                    (ids if r.returncode == 0 else errors).append(r.stdout.strip() or r.stderr)

        def watch():  # what the borrower waits for while the flood lasts
            while flooding.is_set():
                j = c.job(borrower)
                if j and state(j) == "PENDING" and j.get("pending_reason"):
                    reasons.add(j["pending_reason"])
                time.sleep(0.2)

        self.short_file = os.path.join(self.root, "short.yaml")
        with open(self.short_file, "w") as f:
            f.write(SHORT)
        began = time.monotonic()
        watcher = threading.Thread(target=watch)
        watcher.start()
        clients = [threading.Thread(target=flood, args=(FLOOD // 2,)) for _ in range(2)]
        for t in clients:
            t.start()
        for t in clients:
            t.join()
        self.assertEqual(errors, [], "submits refused")
        last_placed = 0  # when the flood's last job was placed: none of it waited after
        for job_id in ids:
            job = c.wait_job(job_id, lambda j: state(j) in ENDED, 300, "the short job ended")
            self.assertEqual(state(job), "SUCCEEDED", c.cli("status", job_id).stdout)
            last_placed = max([last_placed] + [int(h["time_unix_ms"]) for h in job["history"]
                                               if h.get("state") == "STARTING"])
        flooded = time.monotonic() - began
        flooding.clear()
        watcher.join()

        after = c.wait_job(borrower, lambda j: state(j) == "RUNNING", 60,
                           "the borrower runs again after the flood")
        preemptions = int(after.get("preemptions", 0))
        history = after.get("history", [])
        print(f"flood of {len(ids)} jobs on 2 slots: {flooded:.1f} s; the borrower was "
              f"preempted {preemptions} times, its history has {len(history)} entries; "
              f"it waited as: {sorted(reasons)}", flush=True)
        status = c.cli("status", borrower).stdout
        self.assertEqual(preemptions, 1, status)
        self.assertLessEqual(len(history), 8, status)
        # Placed again only once no job of the flood waited.
        preempted = max(i for i, h in enumerate(history) if h.get("reason") == "PREEMPTED")
        placed_again = [int(h["time_unix_ms"]) for h in history[preempted:]
                        if h.get("state") == "STARTING"]
        self.assertTrue(placed_again, status)
        self.assertGreaterEqual(placed_again[0], last_placed,
                                "the borrower was placed while the flood's jobs waited\n" + status)


if __name__ == "__main__":
    unittest.main(verbosity=2)
