"""Ringmaster across simulated hosts (tests/simulated_hosts.py): a coordinator on
host0 and workers on host1 and host2, each host a network namespace with
its own address, hostname, /tmp and /dev/shm, joined by a bridge.

    bazel test //tests:multihost_test      (or /usr/bin/python3 tests/multihost_test.py
                                            after bazel build //...)
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import image_registry  # noqa: E402
import simulated_hosts  # noqa: E402
from chaos_cluster import read_checkpoint  # noqa: E402
from simulated_hosts import Cluster, Hosts  # noqa: E402

ENDED = ("SUCCEEDED", "FAILED", "CANCELLED")
CHECKPOINT_EVERY = 200
# About half a minute of training on two ranks of this machine.
LONG_TRAINER_SPEC = """
name: long
ranks: 2
checkpoint_dir: {checkpoint_dir}
max_restarts: 5
start_timeout_s: 60
hang_timeout_s: 6
trainer:
  model: {{type: mlp, hidden: [256, 256]}}
  data: {{path: "synthetic:rows=20000,features=32,classes=4"}}
  epochs: 20
  batch_size: 32
  checkpoint_every_steps: %d
  # Off, so that the resume after a lost host reads the shared storage
  # (with them, a surviving rank's snapshot in memory would serve).
  snapshot_every_steps: 0
  seed: 3
""" % CHECKPOINT_EVERY


def read_checkpoint_params(path):
    """The parameters of a trainer checkpoint, as float32s."""
    params = read_checkpoint(path)[0]
    return struct.unpack(f"<{len(params) // 4}f", params)


def equivalence_spec(name, ranks, batch_size):
    return f"""
name: {name}
ranks: {ranks}
trainer:
  model: {{type: mlp, hidden: [256, 128]}}
  data: {{path: "synthetic:rows=1024,features=16,classes=4"}}
  epochs: 1
  batch_size: {batch_size}
  optimizer: {{type: sgd, lr: 0.05, momentum: 0.9}}
  lr_scaling: none
  bucket_mb: 0.05
  checkpoint_every_steps: 20
  seed: 7
"""


class MultiHostTest(unittest.TestCase):
    def setUp(self):
        reason = simulated_hosts.unavailable()
        if reason:
            self.skipTest(reason)
        # Not under /tmp, which each host has of its own.
        self.root = tempfile.mkdtemp(prefix=f"multihost-{self._testMethodName}-",
                                     dir=os.environ.get("TEST_TMPDIR", "/var/tmp"))
        self.hosts = Hosts(4)
        self.addCleanup(self.hosts.close)

    def start_cluster(self, worker_hosts=(1, 2), slots=2, coordinator_flags=()):
        self.cluster = Cluster(self.hosts, self.root, worker_hosts=worker_hosts, slots=slots,
                               coordinator_flags=coordinator_flags)
        self.addCleanup(self.cluster.stop)
        self.cluster.start()

    def finish(self, job_id, timeout=180):
        return self.cluster.wait_job(job_id, lambda j: j.get("state") in ENDED, timeout,
                                     "ends")

    def checkpoint(self, job_id, step):
        return read_checkpoint_params(os.path.join(
            self.root, "coordinator", "checkpoints", job_id, f"step-{step}", "state.bin"))

    def test_four_ranks_on_two_hosts_match_one_rank_with_four_times_the_batch(self):
        self.start_cluster()
        before = [self.hosts.traffic(h) for h in (1, 2)]
        four = self.cluster.submit(equivalence_spec("four", 4, 10))
        job = self.finish(four)
        self.assertEqual(job["state"], "SUCCEEDED", (job, self.cluster.logs(four)))
        self.assertEqual(int(job["progress"]["step"]), 20)
        after = [self.hosts.traffic(h) for h in (1, 2)]
        hosts_of_ranks = {r["worker_id"] for r in job["ranks"]}
        self.assertEqual(hosts_of_ranks, {"host1", "host2"}, job["ranks"])
        # The hierarchical all-reduce: shared memory within each host, a
        # ring per local rank between them.
        self.assertIn("all-reduce over shared memory within each of 2 hosts (2 ranks each) and "
                      "2 tcp rings between them", self.cluster.logs(four))

        one = self.cluster.submit(equivalence_spec("one", 1, 40))
        self.assertEqual(self.finish(one)["state"], "SUCCEEDED", self.cluster.logs(one))

        spread, single = self.checkpoint(four, 20), self.checkpoint(one, 20)
        self.assertEqual(len(spread), len(single))
        worst = max(abs(a - b) / max(1e-3, abs(b)) for a, b in zip(spread, single))
        self.assertLess(worst, 1e-3, "relative difference of the weights")

        # The gradients crossed the bridge: each worker host sent and
        # received at least half a gradient per step (far more than the
        # daemons' own traffic of those seconds).
        gradient_bytes = 4 * len(spread)
        for h, (b, a) in zip((1, 2), zip(before, after)):
            print(f"host{h}: sent {a[0] - b[0]} B, received {a[1] - b[1]} B; "
                  f"gradient {gradient_bytes} B x 20 steps")
            self.assertGreater(a[0] - b[0], 20 * gradient_bytes // 2, f"host{h} sent")
            self.assertGreater(a[1] - b[1], 20 * gradient_bytes // 2, f"host{h} received")

    def test_unmodified_pytorch_ddp_script_over_two_hosts(self):
        self.start_cluster()
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_train.py")
        job_id = self.cluster.submit(
            f"name: torch-ddp\nranks: 4\ncommand: [/usr/bin/python3, {script}]\n")
        job = self.finish(job_id)
        logs = self.cluster.logs(job_id)
        self.assertEqual(job["state"], "SUCCEEDED", (job, logs))
        for rank in range(4):
            self.assertIn(f"[rank {rank}] rank {rank}/4 local_rank {rank % 2}: replicas agree",
                          logs)
        self.assertEqual({r["worker_id"] for r in job["ranks"]}, {"host1", "host2"})

    def test_pytorch_ddp_in_an_image_on_two_hosts_each_pulling_itself(self):
        rootfs = "/var/cache/ringmaster-test/rootfs/torch"
        reason = image_registry.unavailable() or (
            None if shutil.which("runc") else "runc is not installed (./dev test installs it)")
        if not os.path.exists(f"{rootfs}/usr/lib/python3/dist-packages/torch"):
            reason = f"no {rootfs} (./dev test makes it with debootstrap)"
        if reason and os.environ.get("RINGMASTER_REQUIRE_IMAGE_TESTS"):
            self.fail(f"the image test cannot run here: {reason}")
        if reason:
            self.skipTest(reason)
        # The registry on host0, beside the coordinator; the workers on host1
        # and host2 pull from it over their own links.
        registry = image_registry.Registry(
            os.path.join(self.root, "registry"), f"{self.hosts.address(0)}:5000",
            spawn=lambda argv, log: self.hosts.popen(0, argv, stdout=log,
                                                     stderr=subprocess.STDOUT))
        self.addCleanup(registry.close)
        image = registry.push_rootfs("team/torch:1.13", rootfs)
        self.cluster = Cluster(self.hosts, self.root, worker_hosts=(1, 2), slots=2, worker_flags=[
            "--container-runtime", "runc", "--registry-auth", registry.auth_file,
            "--registry-certs", registry.certs_dir])
        self.addCleanup(self.cluster.stop)
        self.cluster.start()
        # The script ships as the job's code: the image has only Debian's
        # python3-torch, python3-grpcio and python3-protobuf.
        project = os.path.join(self.root, "project")
        os.makedirs(project)
        shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_report.py"),
                    project)
        spec = (f"name: torch-in-image\nranks: 4\nimage: {image}\nstart_timeout_s: 600\n"
                "command: [python3, ddp_report.py, '30']\n")
        job_id = self.cluster.cli("submit", "-", cwd=project, input=spec).stdout.strip()
        job = self.finish(job_id, timeout=900)
        logs = self.cluster.logs(job_id)
        self.assertEqual(job["state"], "SUCCEEDED", (job, logs))
        self.assertEqual({r["worker_id"] for r in job["ranks"]}, {"host1", "host2"})
        for rank in range(4):
            self.assertIn(f"[rank {rank}] rank {rank}: 30 steps, replicas agree", logs)
        # instrument() and report() reached the coordinator from the image.
        progress = job.get("progress", {})
        self.assertEqual(int(progress.get("step", 0)), 30, job)
        self.assertGreater(float(progress.get("allreduce_bytes", 0)), 0, job)
        # Each worker pulled the image itself.
        for host in (1, 2):
            cached = os.listdir(os.path.join(self.root, f"worker-{host}", "images", "rootfs"))
            self.assertEqual(len(cached), 1, (host, cached))
        print(f"PyTorch DDP in {image} on host1 and host2: {job['progress']}")

    def test_code_submitted_from_a_directory_only_the_submitting_host_has(self):
        self.start_cluster()
        submitter, project = 3, "/tmp/project"  # host3's own /tmp; no worker there
        files = {
            "train.py": "import os, helper\n"
                        "rank = os.environ['RANK']\n"
                        "data = open('data/input.txt').read().strip()\n"
                        "print(f'rank {rank}: {helper.greeting()} {data}; '\n"
                        "      f'left out: {not os.path.exists(\"big\")}; in {os.getcwd()}')\n",
            "helper.py": "def greeting():\n    return 'shipped'\n",
            "data/input.txt": "with its data\n",
            "big/weights.bin": "x" * 4096,
            ".ringmasterignore": "big/\n",
        }
        for name, content in files.items():
            self.hosts.run(submitter, ["sh", "-c", 'mkdir -p "$(dirname "$0")" && cat > "$0"',
                                       f"{project}/{name}"], input=content, check=True)
        for h in (1, 2):
            self.assertNotEqual(self.hosts.run(h, ["test", "-e", project]).returncode, 0)

        spec = "name: shipped\nranks: 4\ncommand: [python3, train.py]\n"
        first = self.cluster.cli("submit", "-", host=submitter, cwd=project, input=spec)
        self.assertRegex(first.stderr, rf"uploaded {project} \(4 files, ")
        job_id = first.stdout.strip()
        job = self.finish(job_id)
        logs = self.cluster.logs(job_id)
        self.assertEqual(job["state"], "SUCCEEDED", (job, logs))
        for rank in range(4):
            self.assertRegex(logs, rf"\[rank {rank}\] rank {rank}: shipped with its data; "
                                   rf"left out: True; in /\S+/jobs/{job_id}/code")
        self.assertEqual(job["spec"]["code"]["source"], f"host{submitter}:{project}")

        # The same content again: not uploaded a second time.
        again = self.cluster.cli("submit", "-", host=submitter, cwd=project, input=spec)
        self.assertIn(f"code already on the coordinator: {project}", again.stderr)
        self.assertEqual(self.finish(again.stdout.strip())["state"], "SUCCEEDED")

        # Over the limit: refused before anything is sent, naming the largest.
        self.hosts.run(submitter, ["sh", "-c", f"head -c 2200000 /dev/zero > {project}/model.pt"],
                       check=True)
        big = self.cluster.cli("submit", "-", "--upload-limit-mb", "1", host=submitter,
                               cwd=project, input=spec, check=False)
        self.assertEqual(big.returncode, 1, big.stderr)
        self.assertIn("more than the 1.0 MiB limit (--upload-limit-mb); the largest: model.pt 2.1 MiB",
                      big.stderr)

        # --no-upload: the path itself, which the workers do not have.
        kept = self.cluster.cli("submit", "-", "--no-upload", host=submitter, cwd=project,
                                input=spec)
        job = self.finish(kept.stdout.strip())
        self.assertEqual(job["state"], "FAILED")
        self.assertIn(f"{project}: No such file or directory", job["history"][-1]["message"])

    def test_a_host_cut_off_during_a_job_and_the_job_resumes_on_the_others(self):
        self.start_cluster(worker_hosts=(1, 2, 3), slots=1, coordinator_flags=[
            "--heartbeat-interval", "250ms", "--heartbeat-timeout", "3s",
            "--worker-grace", "1s", "--stop-grace", "3s",
            "--restart-backoff-base", "250ms", "--restart-backoff-max", "1s"])
        # Checkpoints on storage every host shares.
        shared = os.path.join(self.root, "shared-checkpoints")
        os.makedirs(shared)
        job_id = self.cluster.submit(LONG_TRAINER_SPEC.format(checkpoint_dir=shared))
        job = self.cluster.wait_job(
            job_id, lambda j: int(j.get("progress", {}).get("step", 0)) >= 2 * CHECKPOINT_EVERY,
            120, "two checkpoints written")
        placed = {r["worker_id"] for r in job["ranks"]}
        victim = 1 if "host1" in placed else 2
        self.hosts.cut(victim)

        # The coordinator loses the host, and the job runs again on the two
        # others from its newest checkpoint.
        survivors = {self.cluster.worker_id(h) for h in (1, 2, 3)} - {f"host{victim}"}
        job = self.cluster.wait_job(
            job_id, lambda j: j.get("state") == "RUNNING" and int(j.get("attempt", 0)) >= 1,
            60, "running again")
        self.assertEqual({r["worker_id"] for r in job["ranks"]}, survivors)
        self.assertIn("WORKER_LOST", [h.get("reason") for h in job.get("history", [])])
        job = self.finish(job_id, timeout=300)
        logs = self.cluster.logs(job_id)
        self.assertEqual(job["state"], "SUCCEEDED", (job, logs))
        self.assertRegex(logs, rf"resuming from {shared}/{job_id}/step-[1-9]\d*")

        # With its link back, the host registers again and keeps nothing of
        # the job running.
        self.hosts.restore(victim)
        self.cluster.wait_workers_alive([1, 2, 3], timeout=60)
        simulated_hosts.wait_for(lambda: not self.hosts.processes(victim, job_id), 30,
                           f"the job's old ranks on host{victim} gone")

    def test_a_checkpoint_dir_missing_on_the_hosts_fails_the_job_at_start(self):
        self.start_cluster()
        missing = os.path.join(self.root, "not-mounted")
        job_id = self.cluster.submit(
            LONG_TRAINER_SPEC.format(checkpoint_dir=missing).replace("ranks: 2", "ranks: 4"))
        job = self.finish(job_id, timeout=60)
        self.assertEqual(job["state"], "FAILED")
        self.assertIn(f"could not start: checkpoint_dir {missing}: No such file or directory",
                      job["history"][-1]["message"])
        self.assertEqual(int(job.get("progress", {}).get("step", 0)), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
