#!/usr/bin/env python3
"""docs/quickstart-cluster.md, then the recipes of docs/how-to.md on the
cluster it made, run as written on three simulated machines: network
namespaces, each with its own host name and its own /etc, /usr/local and
/var/lib (overlays), sharing /srv as NFS would.

Every ```sh block of the docs runs, in order, on the machines its
`<!-- quickstart: on ... -->` line names, with the doc's settings pointed
at these machines and the release archive of `./dev package`. Each
`<!-- expect N: REGEX -->` line before a block must hold for its output
(exactly N lines match), retried for `<!-- wait: S -->` seconds. `sudo`,
`scp` and `ssh` are shims that run as root on the machine named, and
`systemctl` runs the units' commands as systemd would
(tests/unit_runner.py), since systemd cannot run here.

Before the upgrade recipe installs the release again, the coordinator's
store is put back to the previous schema version, as the previous release
left it, and afterwards it must be at this one's.

Needs root; skips (exit 0 with a message) where namespaces cannot be made.
"""
import os
import re
import shutil
import stat
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from simulated_hosts import Hosts, unavailable  # noqa: E402

DOCS = ("docs/quickstart-cluster.md", "docs/how-to.md")
STORE = "/var/lib/ringmaster/coordinator.db"
# SQLite's schema version 3: this release's (4) less what 4 added.
PREVIOUS_SCHEMA = ("DROP TABLE worker_health; DELETE FROM schema_version; "
                   "INSERT INTO schema_version VALUES (3);")
ARCHIVE = "ringmaster-linux-x86_64.tar.gz"  # //:package, in the runfiles


class Block:
    def __init__(self, section, where, expects, wait, code):
        self.section = section  # the heading it is under
        self.where = where      # "coordinator", "other workers", "every machine", "admin"
        self.expects = expects  # [(count, regex)]
        self.wait = wait        # seconds the expectations may take
        self.code = code


def read_doc(path):
    """(settings code, [Block]) of the doc."""
    with open(path) as f:
        lines = f.read().splitlines()
    settings, blocks = None, []
    where, expects, wait = None, [], 0
    section = ""
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        marker = re.fullmatch(r"<!-- quickstart: (.+) -->", line)
        expect = re.fullmatch(r"<!-- expect (\d+): (.+) -->", line)
        waited = re.fullmatch(r"<!-- wait: (\d+) -->", line)
        if marker:
            where = marker.group(1)
            expects, wait = [], 0
        elif expect:
            expects.append((int(expect.group(1)), expect.group(2)))
        elif waited:
            wait = int(waited.group(1))
        elif line == "```sh":
            end = lines.index("```", i + 1)
            code = "\n".join(lines[i + 1:end])
            if where == "settings":
                settings = code
            elif where is not None:
                blocks.append(Block(section, where.removeprefix("on "), expects, wait, code))
            else:
                raise ValueError(f"{path}:{i + 1}: a sh block without a quickstart marker")
            where, expects, wait = None, [], 0
            i = end
        i += 1
    return settings, blocks


def point_settings(settings, values):
    """The settings block with these machines' values in place of the doc's."""
    out = []
    for line in settings.splitlines():
        m = re.match(r"(\w+)=", line)
        if m and m.group(1) in values:
            line = f"{m.group(1)}={values[m.group(1)]}"
        out.append(line)
    return "\n".join(out)


def write_shims(shims, hosts, log_dir):
    """sudo, scp, ssh and systemctl for the blocks' PATH."""
    lookup = "case \"$1\" in\n" + "".join(
        f"  {hosts.hostname(i)}) echo {hosts.holders[i].pid} ;;\n" for i in range(hosts.count)
    ) + "  *) echo \"no machine $1\" >&2; exit 1 ;;\nesac\n"
    scripts = {
        "machine-pid": "#!/bin/sh\n" + lookup,
        # As sudo's secure_path, the shims first; -u USER as that user.
        "sudo": f"#!/bin/sh\nexport PATH={shims}:/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                "/usr/bin:/sbin:/bin\nif [ \"$1\" = -u ]; then user=$2; shift 2; "
                "exec setpriv --reuid=\"$user\" --regid=\"$user\" --init-groups \"$@\"; fi\n"
                "exec \"$@\"\n",
        # scp SRC... [user@]HOST:DIR, to that machine's file system.
        "scp": "#!/bin/bash\nset -e\nargs=(\"$@\")\ndest=${args[-1]}\nunset 'args[-1]'\n"
               "host=${dest%%:*}; host=${host#*@}\n"
               f"exec nsenter -t \"$({shims}/machine-pid \"$host\")\" -m -u -n --wd=\"$PWD\" -- "
               "cp \"${args[@]}\" \"${dest#*:}\"\n",
        # ssh [user@]HOST COMMAND, run there as root.
        "ssh": "#!/bin/sh\nhost=${1#*@}; shift\n"
               f"exec nsenter -t \"$({shims}/machine-pid \"$host\")\" -m -u -n -- sh -c \"$*\"\n",
        "systemctl": f"#!/bin/sh\nUNIT_LOG_DIR={log_dir} exec /usr/bin/python3 "
                     f"{os.path.abspath('tests/unit_runner.py')} \"$@\"\n",
    }
    os.makedirs(shims, exist_ok=True)
    for name, text in scripts.items():
        path = os.path.join(shims, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)


@unittest.skipIf(unavailable(), f"simulated machines: {unavailable()}")
class QuickstartClusterTest(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="quickstart-", dir=os.environ.get("TEST_TMPDIR"))
        self.hosts = Hosts(3, machines=True)
        self.addCleanup(self.hosts.close)
        self.addCleanup(shutil.rmtree, self.work, True)
        self.logs = os.path.join(self.work, "logs")
        os.makedirs(self.logs)
        self.shims = os.path.join(self.work, "shims")
        write_shims(self.shims, self.hosts, self.logs)

    def machines(self, where):
        every = list(range(self.hosts.count))
        return {"coordinator": [0], "admin": [0], "other workers": every[1:],
                "every machine": every}[where]

    def run_block(self, block, settings, i):
        # Each machine works in a directory of its own; the admin in another.
        cwd = os.path.join(self.work, "admin" if block.where == "admin" else f"machine{i}")
        os.makedirs(cwd, exist_ok=True)
        script = (f"set -euo pipefail\nexport PATH={self.shims}:/usr/local/bin:$PATH\n"
                  f"{settings}\n{block.code}\n")
        return self.hosts.run(i, ["bash", "-c", script], cwd=cwd, timeout=600)

    def test_the_walkthrough_and_the_recipes_as_written(self):
        settings, blocks = read_doc(DOCS[0])
        self.assertIsNotNone(settings, "the walkthrough has no settings block")
        self.assertGreaterEqual(len(blocks), 10)
        recipes = read_doc(DOCS[1])[1]
        self.assertGreaterEqual(len(recipes), 15)
        archive = os.path.abspath(ARCHIVE)
        settings = point_settings(settings, {
            "COORDINATOR": self.hosts.hostname(0),
            "WORKERS": '"' + " ".join(self.hosts.hostname(i) for i in range(3)) + '"',
            "ARCHIVE": archive,
        })
        downgraded = False
        for n, block in enumerate(blocks + recipes, 1):
            if block.section == "One coordinator" and "install.sh" in block.code:
                self.previous_schema()
                downgraded = True
            for i in self.machines(block.where):
                self.run_until_met(n, block, settings, i)
        self.assertTrue(downgraded, "no upgrade recipe installed the release again")
        version = self.store_query("SELECT version FROM schema_version")
        self.assertEqual(version, "4", "the upgrade did not migrate the store")
        self.assertEqual(self.store_query(
            "SELECT count(*) FROM sqlite_master WHERE name = 'worker_health'"), "1")

    def run_until_met(self, n, block, settings, i):
        deadline = time.monotonic() + block.wait
        while True:
            r = self.run_block(block, settings, i)
            failures = self.unmet(block, r)
            if not failures or time.monotonic() > deadline:
                break
            time.sleep(1)
        self.assertEqual(failures, [], self.report(n, block, i, r))
        print(f"--- block {n} ({block.section}) on {self.hosts.hostname(i)}: ok\n{r.stdout}",
              end="", flush=True)

    def store_query(self, sql):
        # As the coordinator's user: journal files it makes stay its own.
        r = self.hosts.run(0, ["setpriv", "--reuid=ringmaster", "--regid=ringmaster",
                               "--init-groups", "sqlite3", STORE, sql])
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.strip()

    def previous_schema(self):
        """The coordinator's store as the previous release left it (the
        recipe stopped the coordinator)."""
        self.store_query(PREVIOUS_SCHEMA)
        self.assertEqual(self.store_query("SELECT version FROM schema_version"), "3")
        print("--- the coordinator's store is put back to schema version 3", flush=True)

    def unmet(self, block, r):
        if r.returncode != 0:
            return [f"exit code {r.returncode}"]
        lines = r.stdout.splitlines()
        failures = []
        for count, regex in block.expects:
            matched = sum(1 for line in lines if re.search(regex, line))
            if matched != count:
                failures.append(f"{matched} lines match /{regex}/, not {count}")
        return failures

    def report(self, n, block, i, r):
        logs = ""
        for name in sorted(os.listdir(self.logs)):
            with open(os.path.join(self.logs, name), errors="replace") as f:
                logs += f"\n--- {name} (last lines)\n" + "".join(f.readlines()[-15:])
        return (f"\nblock {n} on {self.hosts.hostname(i)}:\n{block.code}\n"
                f"--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}{logs}")


if __name__ == "__main__":
    if unavailable():
        print(f"quickstart_cluster_test skipped: {unavailable()}")
    unittest.main()
