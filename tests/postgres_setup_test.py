"""docs/high-availability.md's "PostgreSQL from scratch", run as written on
a PostgreSQL 15 of the test's own (Debian's postgresql-15, as `nobody`):
its certificates, its role and database, its pg_hba.conf lines, and a
coordinator on the --store URI it gives, with localhost for db.example and
loopback for the coordinators' network. Then what the doc says is refused
is, and a pg_dump of the store restored as docs/how-to.md says is read by
a coordinator with its jobs.

    bazel test //tests:postgres_setup_test
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chaos_cluster import bin_dir, free_port, leads, wait_for  # noqa: E402

PG = "/usr/lib/postgresql/15/bin"
DOC = "docs/high-availability.md"
PASSWORD = "a-password-of-the-test"
SPEC = """
name: on-postgres
ranks: 1
trainer:
  data: {path: digits}
  model: {hidden: [32]}
  epochs: 1
"""


def doc_blocks(path):
    """{name: text} of the ``` blocks after <!-- postgres-setup: NAME -->."""
    blocks = {}
    with open(path) as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        m = re.fullmatch(r"<!-- postgres-setup: (\w+) -->", line.strip())
        if m:
            end = lines.index("```", i + 2)
            blocks[m.group(1)] = "\n".join(lines[i + 2:end])
    return blocks


def unavailable():
    if os.geteuid() != 0:
        return "needs root (the server runs as nobody)"
    if not os.path.exists(f"{PG}/initdb"):
        return "postgresql-15 is not installed"
    return None


@unittest.skipIf(unavailable(), unavailable())
class PostgresSetupTest(unittest.TestCase):
    def setUp(self):
        self.blocks = doc_blocks(DOC)
        # Where nobody (the server's user) may pass: not the test's own
        # temporary directory, under root's home.
        self.dir = tempfile.mkdtemp(prefix="pg-setup-", dir="/var/tmp")
        self.addCleanup(shutil.rmtree, self.dir, True)
        os.chmod(self.dir, 0o755)
        shutil.chown(self.dir, "nobody", "nogroup")  # the server makes its data there
        self.data = os.path.join(self.dir, "data")
        self.port = free_port()
        self.procs = []
        self.logs = []
        self.metrics_ports = {}
        self.addCleanup(self.stop_all)
        self.make_certificates()
        self.start_server()

    def as_nobody(self, argv, **kwargs):
        return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                               *argv], capture_output=True, text=True, cwd=self.dir, **kwargs)

    def make_certificates(self):
        script = self.blocks["certificates"].replace("db.example", "localhost")
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=self.dir,
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        for name in ("server.crt", "server.key"):
            shutil.chown(os.path.join(self.dir, name), "nobody", "nogroup")
        os.chmod(os.path.join(self.dir, "server.key"), 0o600)

    def start_server(self):
        r = self.as_nobody([f"{PG}/initdb", "-D", self.data, "-U", "postgres", "-E", "UTF8",
                            "--no-sync", "--auth-local=trust", "--auth-host=scram-sha-256"])
        self.assertEqual(r.returncode, 0, r.stderr)
        # The doc's lines, with loopback for the coordinators' network, above
        # initdb's own host lines (which let a password in without TLS), and
        # the test's other databases: one the role does not own, one a dump
        # is restored into.
        hba = self.blocks["pg_hba"].replace("10.0.0.0/24", "127.0.0.1/32")
        other = "hostssl other,restored ringmaster 127.0.0.1/32 scram-sha-256"
        path = os.path.join(self.data, "pg_hba.conf")
        with open(path) as f:
            initdb_lines = f.read()
        self.assertIn("host    all             all             127.0.0.1/32", initdb_lines)
        with open(path, "w") as f:
            f.write(f"{hba}\n{other}\n{initdb_lines}")
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(f"ssl = on\nssl_cert_file = '{self.dir}/server.crt'\n"
                    f"ssl_key_file = '{self.dir}/server.key'\n")
        r = self.as_nobody([f"{PG}/pg_ctl", "-D", self.data, "-l", f"{self.dir}/server.log", "-w",
                            "-o", f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1",
                            "start"])
        self.assertEqual(r.returncode, 0, r.stderr + self.server_log())
        self.addCleanup(self.as_nobody, [f"{PG}/pg_ctl", "-D", self.data, "-m", "immediate",
                                         "stop"])
        with open(os.path.join(self.dir, "ringmaster.sql"), "w") as f:
            f.write(self.blocks["sql"] + "\n")
        self.psql("-v", f"password={PASSWORD}", "-f", "ringmaster.sql")
        password = os.path.join(self.dir, "pg-password")
        with open(password, "w") as f:
            f.write(PASSWORD + "\n")
        os.chmod(password, 0o600)

    def server_log(self):
        try:
            with open(os.path.join(self.dir, "server.log")) as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def psql(self, *args, database="postgres"):
        r = self.as_nobody(["psql", "-X", "-v", "ON_ERROR_STOP=1", "-At", "-h", self.dir, "-p",
                            str(self.port), "-U", "postgres", "-d", database, *args])
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.strip()

    def store(self, host="localhost", database="ringmaster", sslmode="verify-full"):
        """The doc's --store URI, pointed at this server."""
        uri = re.search(r"'(postgresql://[^']+)'", self.blocks["store"]).group(1)
        uri = uri.replace("db.example:5432", f"{host}:{self.port}")
        uri = uri.replace("/etc/ringmaster/db-ca.crt", f"{self.dir}/db-ca.crt")
        uri = uri.replace("/ringmaster?", f"/{database}?").replace("verify-full", sslmode)
        return uri

    def coordinator(self, store, name):
        """A coordinator on `store`; (process, its log's path, its address)."""
        port, metrics = free_port(), free_port()
        log = os.path.join(self.dir, f"{name}.log")
        with open(log, "wb") as out:
            proc = subprocess.Popen([
                f"{bin_dir()}/coordinator/ringmaster-coordinator", "--port", str(port),
                "--metrics-port", str(metrics), "--http-port", "0",
                "--state-dir", os.path.join(self.dir, name),
                "--store", store, "--store-password-file", os.path.join(self.dir, "pg-password"),
                "--checkpoint-dir", os.path.join(self.dir, "checkpoints"),
            ], stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        self.logs.append(log)
        self.metrics_ports[f"127.0.0.1:{port}"] = metrics
        return proc, log, f"127.0.0.1:{port}"

    def wait_leading(self, address):
        """Until the coordinator at `address` leads (its /ready). As a
        standby it answers reads first, and its port closes for a moment
        while it turns into the leader."""
        metrics = f"127.0.0.1:{self.metrics_ports[address]}"
        wait_for(lambda: leads(metrics), 60, f"the coordinator at {address} leads", interval=0.2)

    def stop_all(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def cli(self, address, *args, check=True):
        r = subprocess.run([f"{bin_dir()}/client/ringmaster", "--coordinator", address, *args],
                           capture_output=True, text=True, timeout=120)
        if check:
            self.assertEqual(r.returncode, 0, r.stderr + self.coordinator_logs())
        return r

    def coordinator_logs(self):
        text = ""
        for log in self.logs:
            with open(log, errors="replace") as f:
                text += f"\n--- {os.path.basename(log)}:\n" + f.read()[-3000:]
        return text

    def says(self, log, text, timeout=30):
        def found():
            with open(log, errors="replace") as f:
                return text in f.read()
        wait_for(found, timeout, f"{os.path.basename(log)} says {text!r}", interval=0.2)

    def test_the_role_the_tls_the_refusals_and_a_restored_dump(self):
        attributes = self.psql("-c", "SELECT rolsuper, rolcreatedb, rolcreaterole FROM pg_roles "
                                     "WHERE rolname = 'ringmaster'")
        self.assertEqual(attributes, "f|f|f")

        # The doc's URI: the coordinator creates its schema and runs a job.
        proc, log, address = self.coordinator(self.store(), "coordinator")
        self.wait_leading(address)
        worker = subprocess.Popen([
            f"{bin_dir()}/worker/ringmaster-worker", "--coordinator", address,
            "--port", str(free_port()), "--metrics-port", str(free_port()), "--slots", "1",
            "--id", "w0",
            "--state-dir", os.path.join(self.dir, "worker"), "--rank-user", "root",
            "--trainer-bin", f"{bin_dir()}/trainer/ringmaster-trainer"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(worker)
        spec = os.path.join(self.dir, "job.yaml")
        with open(spec, "w") as f:
            f.write(SPEC)
        job = self.cli(address, "submit", spec, "--follow").stdout.splitlines()[0].strip()
        status = json.loads(self.cli(address, "--output", "json", "status", job).stdout)
        self.assertEqual(status["state"], "SUCCEEDED", status)
        owners = self.psql("-c", "SELECT DISTINCT tableowner FROM pg_tables WHERE "
                                 "schemaname = 'public'", database="ringmaster")
        self.assertEqual(owners, "ringmaster")
        print(f"{job} SUCCEEDED on the store {self.store()}")

        # A role that does not own its database may not create in public.
        self.psql("-c", "CREATE DATABASE other OWNER postgres")
        self.psql("-c", "GRANT CONNECT ON DATABASE other TO ringmaster")
        _, other_log, _ = self.coordinator(self.store(database="other"), "other")
        self.says(other_log, "permission denied for schema public")
        # A certificate that does not name the host dialled; no TLS.
        _, named_log, _ = self.coordinator(self.store(host="127.0.0.1"), "by-address")
        self.says(named_log, 'does not match host name "127.0.0.1"')
        _, plain_log, _ = self.coordinator(self.store(sslmode="disable"), "plain")
        self.says(plain_log, "no encryption")
        print("refused: a role that does not own its database, a certificate for another "
              "name, a connection without TLS")

        # Backed up while the coordinator runs, restored as how-to.md says.
        dump = os.path.join(self.dir, "ringmaster.dump")
        r = self.as_nobody(["pg_dump", "-Fc", "-f", dump, "-h", self.dir, "-p", str(self.port),
                            "-U", "postgres", "ringmaster"])
        self.assertEqual(r.returncode, 0, r.stderr)
        proc.kill()
        proc.wait()
        self.psql("-c", "CREATE DATABASE restored OWNER ringmaster")
        r = subprocess.run(["pg_restore", "-O", "-d", self.store(database="restored"), dump],
                           capture_output=True, text=True,
                           env=dict(os.environ, PGPASSWORD=PASSWORD))
        self.assertEqual(r.returncode, 0, r.stderr)
        _, _, restored = self.coordinator(self.store(database="restored"), "restored")
        self.wait_leading(restored)
        status = json.loads(self.cli(restored, "--output", "json", "status", job).stdout)
        self.assertEqual(status["state"], "SUCCEEDED", status)
        print(f"restored from pg_dump: {job} {status['state']}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
