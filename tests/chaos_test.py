"""Chaos suite: real daemons (a coordinator and three one-slot workers on
loopback, short timeouts), a trainer job of about a minute with
checkpoints, and one failure per case: a rank or a worker killed or
paused, the coordinator killed during a burst of jobs, a duplicate worker
id, a job shrunk below its ranks and grown back, a worker drained, a GPU's
XID 79 that cordons its worker as its rank dies.

After each case the job ended SUCCEEDED at its last step, the failure is in
`ringmaster status` with its reason, training resumed from no earlier than
the newest checkpoint at the failure, the test accuracy is within a point
of an undisturbed run's, and no process of the job is left, children of
ranks included. And after every case no job is RUNNING without a live rank,
and every worker's slots are free once no job is active.

    bazel test //tests:chaos_test          (or /usr/bin/python3 tests/chaos_test.py
                                            after bazel build //...)
"""
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chaos_cluster  # noqa: E402
from chaos_cluster import Cluster, attempt, history_reasons, state, step, wait_for  # noqa: E402

COORDINATOR_FLAGS = [
    "--heartbeat-interval", "250ms", "--heartbeat-timeout", "3s", "--worker-grace", "1s",
    "--stop-grace", "5s", "--restart-backoff-base", "250ms", "--restart-backoff-max", "2s",
]
WORKER_FLAGS = ["--shutdown-grace", "5s"]
ENDED = ("SUCCEEDED", "FAILED", "CANCELLED")
# About a minute of training on two ranks of this machine; a checkpoint every
# two seconds or so.
EPOCHS = 200
SNAPSHOT_MEMORY = "ringmaster_worker_snapshot_memory_bytes"
CHECKPOINT_EVERY = 500


def trainer_spec(name, ranks=2, min_ranks=None, snapshot_every=1):
    return f"""
name: {name}
ranks: {ranks}
min_ranks: {min_ranks or ranks}
max_restarts: 10
start_timeout_s: 60
hang_timeout_s: 6
scale_up_after_s: 5
trainer:
  model: {{type: mlp, hidden: [512, 512]}}
  data: {{path: digits, test_fraction: 0.2}}
  epochs: {EPOCHS}
  batch_size: 16
  optimizer: {{type: adamw, lr: 0.0005, weight_decay: 0.01}}
  lr_scaling: linear
  warmup_steps: 20
  checkpoint_every_steps: {CHECKPOINT_EVERY}
  snapshot_every_steps: {snapshot_every}
  seed: 1
"""


def final_accuracy(logs):
    found = re.findall(r"final: test accuracy ([0-9.]+)", logs)
    return float(found[-1]) if found else None


def resumed_steps(logs):
    """Where each attempt resumed: "resuming from DIR/step-N" (a checkpoint
    on disk) or "resuming at step N from memory" (its workers' snapshots)."""
    return [int(s) for s in re.findall(r"resuming (?:from \S*/step-|at step )(\d+)", logs)]


class ChaosTest(unittest.TestCase):
    reference = None  # (accuracy, total steps, seconds) of an undisturbed run
    reference_checkpoints = None  # and its checkpoints: {step: (parameters, optimizer)}

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix=f"chaos-{self._testMethodName}-",
                                     dir=os.environ.get("TEST_TMPDIR"))
        worker_env = {}
        if self._testMethodName == "test_xid":  # a GPU per worker, errors injected
            worker_env = {
                "RINGMASTER_NVML_LIBRARY": os.path.join(chaos_cluster.bin_dir(), "worker",
                                                        "testing", "libfake_nvml.so"),
                "FAKE_NVML_DEVICES": "GPU-chaos:0:0:17179869184:0:0:0:0",
                "FAKE_NVML_CONTROL": os.path.join(self.root, "nvml-{pid}"),
            }
        worker_flags = list(WORKER_FLAGS)
        if self._testMethodName == "test_state_too_large_for_memory_resumes_from_disk":
            worker_flags += ["--snapshot-memory-limit", "1MiB"]
        self.cluster = Cluster(self.root, workers=3, coordinator_flags=COORDINATOR_FLAGS,
                               worker_flags=worker_flags, worker_env=worker_env)
        self.addCleanup(shutil.rmtree, self.root, ignore_errors=True)
        self.addCleanup(self.cluster.stop)
        self.cluster.start()
        self.addCleanup(self.assert_settled)  # before the cluster stops

    def assert_settled(self):
        """After every case: no job is left RUNNING with no live rank, and
        once no job is active every slot of every worker is free."""
        c = self.cluster
        seen = {}

        def settled():
            r = c.cli("--output", "json", "jobs", "--all", check=False)
            if r.returncode != 0:
                return False
            jobs = json.loads(r.stdout).get("jobs", [])
            seen["orphans"] = [j["id"] for j in jobs
                               if state(j) == "RUNNING" and not c.processes(j["id"])]
            seen["active"] = [j["id"] for j in jobs if state(j) not in ENDED]
            seen["used"] = {w["id"]: int(w.get("slots_used", 0)) for w in c.worker_list()}
            # And the snapshot memory of every worker that answers: freed
            # with the jobs that ended.
            seen["snapshot memory"] = {
                i: held for i in c.worker_procs if c.worker_procs[i].poll() is None
                for held in [c.worker_metric(i, SNAPSHOT_MEMORY)] if held and any(held.values())}
            return not seen["orphans"] and (seen["active"] or (
                not any(seen["used"].values()) and not seen["snapshot memory"]))
        try:
            wait_for(settled, 60, "no job RUNNING without a live rank, and every slot free")
        except TimeoutError:
            self.fail(f"the cluster did not settle: RUNNING with no live rank "
                      f"{seen.get('orphans')}; active {seen.get('active')}; slots used "
                      f"{seen.get('used')}; snapshot memory held {seen.get('snapshot memory')}")

    @classmethod
    def undisturbed(cls, test):
        if cls.reference is None:
            c = test.cluster
            began = time.monotonic()
            job_id = c.submit(trainer_spec("reference"), "reference")
            job = c.wait_job(job_id, lambda j: state(j) in ENDED, 600, "ended")
            test.assertEqual(state(job), "SUCCEEDED", c.cli("status", job_id).stdout)
            cls.reference = (final_accuracy(c.logs(job_id)), step(job),
                             time.monotonic() - began)
            cls.reference_checkpoints = {s: c.checkpoint_params(job_id, s)
                                         for s in c.checkpoints(job_id)}
            print(f"undisturbed run: accuracy {cls.reference[0]:.4f}, "
                  f"{cls.reference[1]} steps, {cls.reference[2]:.0f} s", flush=True)
            test.assert_no_process_left(job_id)
        return cls.reference

    # -- what every case checks -------------------------------------------

    def assert_no_process_left(self, job_id):
        wait_for(lambda: not self.cluster.processes(job_id), 30,
                 f"every process of {job_id} gone")

    def run_until_checkpointed(self, job_id):
        """Waits until the job runs past its first checkpoint; returns it."""
        return self.cluster.wait_job(
            job_id, lambda j: state(j) == "RUNNING" and step(j) > CHECKPOINT_EVERY + 100, 120,
            "running past its first checkpoint")

    def assert_recovered(self, job_id, reasons, checkpoint_at_failure, same_world=True):
        c = self.cluster
        job = c.wait_job(job_id, lambda j: state(j) in ENDED, 600, "ended")
        status = c.cli("status", job_id).stdout
        self.assertEqual(state(job), "SUCCEEDED", status)
        progress = job.get("progress", {})
        self.assertEqual(int(progress.get("step", 0)), int(progress.get("total_steps", -1)),
                         status)
        accuracy, planned_steps, _ = self.reference
        if same_world:
            self.assertEqual(step(job), planned_steps, "not the planned final step")
        for reason in reasons:
            self.assertIn(reason, history_reasons(job), status)
            self.assertIn(reason, status, "the reason is not shown by `ringmaster status`")
        logs = c.logs(job_id)
        resumed = resumed_steps(logs)
        self.assertTrue(resumed, "the job restarted without resuming from a checkpoint")
        self.assertGreaterEqual(
            resumed[0], checkpoint_at_failure,
            f"resumed from step {resumed[0]}, before the checkpoint of step "
            f"{checkpoint_at_failure} that existed at the failure")
        self.assertIsNotNone(final_accuracy(logs), logs[-2000:])
        self.assertLessEqual(abs(final_accuracy(logs) - accuracy), 0.01,
                             f"accuracy {final_accuracy(logs)} against {accuracy} undisturbed")
        self.assert_no_process_left(job_id)
        return job

    def assert_same_weights(self, job_id, job):
        """The job's last checkpoint (after the failure) holds exactly the
        parameters and optimizer state of the run never disturbed at that
        step."""
        last = self.cluster.checkpoints(job_id)[-1]
        self.assertIn(last, self.reference_checkpoints, "the undisturbed run kept no such step")
        params, optimizer = self.cluster.checkpoint_params(job_id, last)
        self.assertTrue(params == self.reference_checkpoints[last][0],
                        f"the parameters at step {last} differ from the undisturbed run's")
        self.assertTrue(optimizer == self.reference_checkpoints[last][1],
                        f"the optimizer state at step {last} differs from the undisturbed run's")

    def rank_of(self, job, rank):
        for r in job.get("ranks", []):
            if int(r.get("rank", 0)) == rank:
                return r
        self.fail(f"rank {rank} not in {job}")

    def start_job(self, name, **kw):
        self.undisturbed(self)
        job_id = self.cluster.submit(trainer_spec(name, **kw), name)
        return job_id, self.run_until_checkpointed(job_id)

    # -- the cases -------------------------------------------------------

    def test_kill_rank(self):
        # Only the killed rank is started again: rank 0 keeps its process,
        # and both go on from memory. The kill lands while rank 1 writes a
        # snapshot: its other slot's serves.
        job_id, job = self.start_job("kill-rank")
        # What assert_settled sees freed: held while the job runs.
        held = self.cluster.worker_metric(
            self.cluster.worker_index(self.rank_of(job, 1)["worker_id"]), SNAPSHOT_MEMORY)
        self.assertGreater(sum(v for k, v in held.items() if 'kind="segments"' in k), 0, held)
        pid = int(self.rank_of(job, 1)["pid"])
        survivor = int(self.rank_of(job, 0)["pid"])
        checkpoint = self.cluster.checkpoints(job_id)[-1]
        committed = self.stop_while_writing_a_snapshot(pid)
        print(f"rank 1 stopped and killed writing a snapshot; its other slot holds step "
              f"{committed}", flush=True)
        os.kill(pid, signal.SIGKILL)
        job = self.assert_recovered(job_id, ["RANK_REPLACED", "RESUMED"], checkpoint)
        self.assertEqual(attempt(job), 0, "every rank was restarted")
        self.assertEqual(int(self.rank_of(job, 0)["pid"]), survivor, "rank 0 was restarted")
        self.assertNotEqual(int(self.rank_of(job, 1)["pid"]), pid)
        self.assertEqual(int(job.get("group_generation", 0)), 1)
        resumed = job.get("resumed", {})
        self.assertEqual(resumed.get("from"), "memory", resumed)
        self.assertEqual(int(resumed.get("steps_redone", 0)), 0, resumed)
        self.assertEqual(int(resumed.get("generation", 0)), 1, resumed)
        self.assertIn("was killed by signal 9: rank 1 started again alone on its worker",
                      self.cluster.cli("status", job_id).stdout)
        self.assert_same_weights(job_id, job)

    def stop_while_writing_a_snapshot(self, pid):
        """Stops the rank (SIGSTOP) at a moment its segment has a slot being
        written (sequence 0) beside a committed one, as its header says
        (domain/snapshot_segment.h: the slots' headers at 32 and 96, each
        its sequence first, then its step). Returns the committed step."""
        fd = chaos_cluster.environ_of(pid)["RINGMASTER_SNAPSHOT_FD"]
        for _ in range(200):
            os.kill(pid, signal.SIGSTOP)
            with open(f"/proc/{pid}/fd/{fd}", "rb") as f:
                header = f.read(160)
            slots = [struct.unpack_from("<Qq", header, at) for at in (32, 96)]
            writing = [step for sequence, step in slots if sequence == 0]
            committed = [step for sequence, step in slots if sequence != 0]
            if writing and committed:
                return committed[0]
            os.kill(pid, signal.SIGCONT)
            time.sleep(random.uniform(0, 0.003))
        self.fail("rank 1 was never caught writing a snapshot")

    def snapshots(self, job_id):
        s = self.cluster.job(job_id).get("snapshots", {})
        return (int(s.get("consistent_step", 0)), int(s.get("newest_step", 0)),
                int(s.get("replica_step", 0)))

    def hold_still_replicated(self, job_id, rank_pid):
        """Stops the rank (SIGSTOP), so that the job takes no more
        snapshots, and waits until every rank's newest snapshot is also a
        replica on a peer; tried again when the stop caught a snapshot
        half written."""
        for _ in range(3):
            os.kill(rank_pid, signal.SIGSTOP)
            try:
                return wait_for(lambda: (lambda s: s[0] > 0 and s[0] == s[1] == s[2] and s)(
                    self.snapshots(job_id)), 4, "every rank's newest snapshot replicated")
            except TimeoutError:
                os.kill(rank_pid, signal.SIGCONT)
                time.sleep(0.5)
        self.fail(f"snapshots never held still and replicated: {self.snapshots(job_id)}")

    def test_kill_worker_restores_from_the_peers_replica(self):
        c = self.cluster
        job_id, job = self.start_job("kill-worker-replica", snapshot_every=200)
        rank0 = self.rank_of(job, 0)
        consistent, _, _ = self.hold_still_replicated(job_id, int(rank0["pid"]))
        checkpoint = c.checkpoints(job_id)[-1]
        # Rank 0's worker, its segment with it: the peer's replica serves.
        c.signal_worker(c.worker_index(rank0["worker_id"]), signal.SIGKILL)
        job = self.assert_recovered(job_id, ["WORKER_LOST", "RESUMED"], checkpoint)
        resumed = job.get("resumed", {})
        self.assertEqual(resumed.get("from"), "replica", resumed)
        self.assertEqual(int(resumed.get("step", 0)), consistent, resumed)
        self.assertIn("rank 0's fetched from a peer's replica", c.logs(job_id))
        self.assertIn("with snapshots fetched from peers' replicas", c.cli("status", job_id).stdout)
        self.assert_same_weights(job_id, job)

    def test_kill_a_worker_and_its_replica_holder(self):
        c = self.cluster
        job_id, job = self.start_job("kill-both")
        checkpoint = c.checkpoints(job_id)[-1]
        workers = sorted({c.worker_index(r["worker_id"]) for r in job["ranks"]})
        self.assertEqual(len(workers), 2, job["ranks"])
        for w in workers:  # each holds the other's replicas
            c.signal_worker(w, signal.SIGKILL)
        c.start_worker(workers[0])  # back, with nothing in memory
        job = self.assert_recovered(job_id, ["WORKER_LOST", "RESUMED"], checkpoint)
        self.assertEqual(job.get("resumed", {}).get("from"), "disk", job.get("resumed"))
        status = c.cli("status", job_id).stdout
        self.assertIn("from disk: no snapshot in its workers' memory was as new", status)

    def test_state_too_large_for_memory_resumes_from_disk(self):
        # Workers whose --snapshot-memory-limit cannot hold the job's state:
        # it runs on without snapshots, says so, and a restart reads disk.
        c = self.cluster
        job_id, job = self.start_job("too-large")
        status = c.cli("status", job_id).stdout
        self.assertIn("snapshots: off (", status)
        self.assertIn("restarts resume from disk", status)
        self.assertIn("no snapshots in memory: a snapshot of this model and its optimizer is",
                      c.logs(job_id))
        checkpoint = c.checkpoints(job_id)[-1]
        os.kill(int(self.rank_of(job, 1)["pid"]), signal.SIGKILL)
        job = self.assert_recovered(job_id, ["RANK_SIGNALED"], checkpoint)
        self.assertEqual(attempt(job), 1, "every rank restarted")
        self.assertIn("resuming from", c.logs(job_id), "not from a checkpoint on disk")
        self.assert_same_weights(job_id, job)

    def test_kill_worker(self):
        # Rank 1's worker, which holds rank 0's replicas: the job goes on
        # from memory, and its ranks' snapshots are replicated again on the
        # workers it runs on now.
        c = self.cluster
        job_id, job = self.start_job("kill-worker")
        worker = c.worker_index(self.rank_of(job, 1)["worker_id"])
        checkpoint = c.checkpoints(job_id)[-1]
        c.signal_worker(worker, signal.SIGKILL)

        def replica_on_rank_1s_new_worker():
            j = c.job(job_id)
            if attempt(j) == 0 or state(j) != "RUNNING":
                return None
            new = c.worker_index(self.rank_of(j, 1)["worker_id"])
            held = c.worker_metric(new, SNAPSHOT_MEMORY) or {}
            replicas = sum(v for k, v in held.items() if 'kind="replicas"' in k)
            return replicas > 0 and (new, replicas)
        new, replicas = wait_for(replica_on_rank_1s_new_worker, 60,
                                 "rank 0's replica held by rank 1's new worker")
        print(f"rank 1's new worker chaos-{new} holds {replicas / 2**20:.1f} MiB of replicas",
              flush=True)
        job = self.assert_recovered(job_id, ["WORKER_LOST"], checkpoint)
        self.assert_same_weights(job_id, job)

    def test_stop_rank(self):
        c = self.cluster
        job_id, job = self.start_job("stop-rank")
        pid = int(self.rank_of(job, 1)["pid"])
        checkpoint = c.checkpoints(job_id)[-1]
        os.kill(pid, signal.SIGSTOP)
        job = self.assert_recovered(job_id, ["RANK_HUNG"], checkpoint)
        hung = [h for h in job["history"] if h.get("reason") == "RANK_HUNG"]
        self.assertIn("rank 1", hung[0].get("message", ""), "the hung rank is not named")
        self.assertFalse(chaos_cluster.alive(pid), "the stopped rank was left")

    def test_stop_worker_past_the_timeout(self):
        c = self.cluster
        job_id, job = self.start_job("stop-worker")
        worker = c.worker_index(self.rank_of(job, 1)["worker_id"])
        old_rank = int(self.rank_of(job, 1)["pid"])
        checkpoint = c.checkpoints(job_id)[-1]
        c.signal_worker(worker, signal.SIGSTOP)
        try:
            c.wait_job(job_id, lambda j: "WORKER_LOST" in history_reasons(j), 15,
                       "WORKER_LOST")
            c.wait_job(job_id, lambda j: state(j) == "RUNNING" and attempt(j) >= 1, 30,
                       "running again without the paused worker")
        finally:
            c.signal_worker(worker, signal.SIGCONT)
        c.wait_workers_alive([worker])
        wait_for(lambda: not chaos_cluster.alive(old_rank), 30,
                 "the paused worker's rank of the ended attempt stopped")
        self.assert_recovered(job_id, ["WORKER_LOST"], checkpoint)

    def test_duplicate_worker_id(self):
        c = self.cluster
        job_id, job = self.start_job("duplicate")
        holder = c.worker_index(self.rank_of(job, 0)["worker_id"])
        # Another machine claiming the id, and a second process on the same
        # state dir: both refused, neither disturbs the worker or its ranks.
        other_host = c.worker_argv(holder)
        other_host[other_host.index("--state-dir") + 1] = os.path.join(self.root, "impostor")
        holder_address = self.rank_of(job, 0)["worker_address"]
        for argv, expected in ((other_host, [f"is held by the worker at {holder_address}"]),
                               (c.worker_argv(holder), ["in use by another worker"])):
            r = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                               env=dict(os.environ, RINGMASTER_COORDINATOR=c.address))
            self.assertNotEqual(r.returncode, 0, r.stderr)
            for text in expected:
                self.assertIn(text, r.stdout + r.stderr)
        job = c.wait_job(job_id, lambda j: state(j) in ENDED, 600, "ended")
        self.assertEqual(state(job), "SUCCEEDED", c.cli("status", job_id).stdout)
        self.assertEqual(attempt(job), 0, "the duplicate disturbed the job")
        self.assertEqual(step(job), self.reference[1])
        self.assert_no_process_left(job_id)

    def test_shrink_below_ranks_and_grow_back(self):
        # Rank 1's worker lost, and no slot free elsewhere: rank 0 keeps its
        # process and goes on alone, the group shrunk; the job grows back
        # to two ranks once the workers return.
        c = self.cluster
        job_id, job = self.start_job("elastic", ranks=2, min_ranks=1)
        survivor = int(self.rank_of(job, 0)["pid"])
        holders = {c.worker_index(r["worker_id"]) for r in job["ranks"]}
        spare = ({0, 1, 2} - holders).pop()
        lost = c.worker_index(self.rank_of(job, 1)["worker_id"])
        checkpoint = c.checkpoints(job_id)[-1]
        c.signal_worker(spare, signal.SIGKILL)
        c.signal_worker(lost, signal.SIGKILL)
        shrunk = c.wait_job(job_id, lambda j: state(j) == "RUNNING" and
                            int(j.get("world_size", 0)) == 1, 60, "running on one rank")
        self.assertEqual(attempt(shrunk), 0, "every rank was restarted to shrink")
        self.assertEqual(int(self.rank_of(shrunk, 0)["pid"]), survivor, "rank 0 was restarted")
        self.assertEqual(int(self.rank_of(shrunk, 1).get("left_generation", 0)), 1, shrunk)
        began = step(shrunk)
        c.wait_job(job_id, lambda j: step(j) > began + 200, 60, "training on one rank")
        self.assertIn("left (group 1)", c.cli("status", job_id).stdout)
        c.start_worker(spare)
        c.start_worker(lost)
        c.wait_job(job_id, lambda j: state(j) == "RUNNING" and
                   int(j.get("world_size", 0)) == 2, 90, "grown back to two ranks")
        job = self.assert_recovered(job_id, ["GROUP_SHRUNK", "SCALING_UP"],
                                    checkpoint, same_world=False)
        self.assertEqual(int(job.get("world_size", 0)), 2)

    def cordon_of(self, worker_id):
        for w in self.cluster.worker_list():
            if w["id"] == worker_id:
                return w.get("health", {}).get("cordon")
        return None

    def test_drain(self):
        c = self.cluster
        job_id, job = self.start_job("drain")
        drained = self.rank_of(job, 1)["worker_id"]
        old_rank = int(self.rank_of(job, 1)["pid"])
        checkpoint = c.checkpoints(job_id)[-1]
        c.cli("drain", drained, "--grace", "10s", "--reason", "chaos")
        self.assertIsNotNone(self.cordon_of(drained))
        wait_for(lambda: not chaos_cluster.alive(old_rank), 30, "the drained rank stopped")
        job = self.assert_recovered(job_id, ["WORKER_DRAINED"], checkpoint)
        self.assertEqual(int(job.get("restarts", 0)), 0, "a drain counted as a restart")
        for r in job["ranks"]:
            self.assertNotEqual(r["worker_id"], drained, "placed on the drained worker")
        self.assertIn("drained by admin", self.cordon_of(drained)["reason"] +
                      c.cli("workers").stdout)
        c.cli("uncordon", drained)
        self.assertIsNone(self.cordon_of(drained))

    def test_xid(self):
        c = self.cluster
        job_id, job = self.start_job("xid")
        broken = self.rank_of(job, 1)["worker_id"]
        index = c.worker_index(broken)
        checkpoint = c.checkpoints(job_id)[-1]
        # The GPU falls off the bus, and the rank using it dies with it.
        with open(os.path.join(self.root, f"nvml-{c.worker_pid(index)}"), "a") as f:
            f.write("xid 0 79\n")
        wait_for(lambda: self.cordon_of(broken) is not None, 2, "the worker cordoned")
        self.assertIn("XID 79 (GPU has fallen off the bus)", self.cordon_of(broken)["reason"])
        os.kill(int(self.rank_of(job, 1)["pid"]), signal.SIGKILL)
        job = self.assert_recovered(job_id, ["RANK_SIGNALED"], checkpoint)
        for r in job["ranks"]:
            self.assertNotEqual(r["worker_id"], broken, "placed on the cordoned worker")
        self.assertIsNotNone(self.cordon_of(broken), "no time heals a broken GPU")

    def test_kill_coordinator_during_a_burst(self):
        c = self.cluster
        ids = [c.submit("name: burst\nranks: 1\ncommand: [sh, -c, 'sleep 0.1']\n", "burst")
               for _ in range(100)]

        def succeeded():
            listing = c.cli("--output", "json", "jobs", check=False)
            return listing.stdout.count('"SUCCEEDED"') if listing.returncode == 0 else 0
        wait_for(lambda: succeeded() >= 20, 120, "20 of the burst's jobs done")
        c.kill_coordinator()
        c.start_coordinator()
        states = {}

        def all_ended():
            for job_id in ids:
                if states.get(job_id) not in ENDED:
                    job = c.job(job_id)
                    states[job_id] = state(job) if job else ""
            return all(s in ENDED for s in states.values())
        wait_for(all_ended, 300, "every job of the burst ended")
        failed = {j: s for j, s in states.items() if s != "SUCCEEDED"}
        self.assertEqual(failed, {}, "\n".join(c.cli("status", j).stdout for j in failed))
        for job_id in ids:
            self.assertFalse(c.processes(job_id), job_id)


if __name__ == "__main__":
    unittest.main(verbosity=2)
