"""The web console in a real browser (Debian's chromium, headless, driven by
puppeteer-core from tests/console/package-lock.json): tests/console/
console_test.js signs in through `ringmaster ui`'s URL, watches a job's row
go PENDING, RUNNING, SUCCEEDED without a reload, reads each rank's log lines
live, sees the loss chart's points, cordons a worker as the admin, and as
another user finds no cancel button and a forged cancel refused; a change
without the CSRF token is refused. It writes screenshots of the jobs list
and of a job page to the test's outputs (docs/console.md shows them).

The cluster is `ringmaster up` with TLS; the browser reaches it through
`ringmaster ui --proxy`, so it needs no CA. ./dev test installs chromium and
the npm packages, and says where they are (RINGMASTER_CONSOLE_NODE_MODULES).

    bazel test //tests:console_browser_test \\
        --test_env=RINGMASTER_CONSOLE_NODE_MODULES=$PWD/tests/console/node_modules
"""
import json
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_api_test import ADMIN_TOKEN, TlsCluster  # noqa: E402


class ConsoleBrowserTest(TlsCluster):
    def setUp(self):
        self.node_modules = os.environ.get("RINGMASTER_CONSOLE_NODE_MODULES", "")
        self.chromium = shutil.which("chromium")
        if not os.path.isdir(os.path.join(self.node_modules, "puppeteer-core")) or \
                not self.chromium:
            self.fail("the browser tests need Debian's chromium and tests/console's npm "
                      "packages: run ./dev test, which installs both and sets "
                      "RINGMASTER_CONSOLE_NODE_MODULES")

    def run_cli(self, token, *args, stdout=None):
        env = dict(os.environ, RINGMASTER_TOKEN=token,
                   RINGMASTER_TLS_DIR=os.path.join(self.state, "tls"))
        argv = [f"{self.bins}/client/ringmaster", "--coordinator", self.address, *args]
        if stdout is not None:
            return subprocess.Popen(argv, stdout=stdout, text=True, env=env)
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)

    def test_the_console_in_chromium(self):
        proxy = self.run_cli(ADMIN_TOKEN, "ui", "--proxy", "-o", "json", stdout=subprocess.PIPE)
        self.addCleanup(proxy.stdout.close)
        self.addCleanup(proxy.wait)
        self.addCleanup(proxy.terminate)
        admin = json.loads(proxy.stdout.readline())
        base = admin["url"].split("/login")[0]
        bob = self.run_cli(self.bob, "ui", "-o", "json", "--url", base)
        self.assertEqual(bob.returncode, 0, bob.stderr)
        screenshots = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR", self.root)
        workers = json.loads(self.run_cli(ADMIN_TOKEN, "workers", "-o", "json").stdout)
        env = dict(os.environ, NODE_PATH=self.node_modules, CONSOLE_BASE=base,
                   ADMIN_LOGIN_URL=admin["url"], BOB_LOGIN_URL=json.loads(bob.stdout)["url"],
                   ADMIN_TOKEN=ADMIN_TOKEN, WORKER_ID=workers["workers"][0]["id"],
                   SCREENSHOTS=screenshots, CHROMIUM=self.chromium,
                   HOME=self.root)
        run = subprocess.run(["node", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "console", "console_test.js")],
                             capture_output=True, text=True, timeout=600, env=env)
        print(run.stdout, run.stderr, sep="\n")
        self.assertEqual(run.returncode, 0, "the browser test failed: see above")
        for name in ("console-jobs.png", "console-job.png"):
            self.assertGreater(os.path.getsize(os.path.join(screenshots, name)), 10000, name)


if __name__ == "__main__":
    unittest.main()
