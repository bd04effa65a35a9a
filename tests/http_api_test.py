"""The coordinator's HTTP/JSON API with curl, against a TLS cluster of
`ringmaster up` (an admin token, and a user's token from
`ringmaster-coordinator --issue-user-token`): every unary route, the errors
and their HTTP statuses, what another user sees of a job and may do to it,
and the admin's verbs refused to a user. And the web console's sign-in:
`ringmaster ui`'s one-time URL, its cookies, the CSRF token a change needs,
a token pasted, the pages' headers, and `ringmaster ui --proxy`.

    bazel test //tests:http_api_test
"""
import base64
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chaos_cluster import bin_dir, wait_for  # noqa: E402

ADMIN_TOKEN = "http-api-test-admin-token-0123456789"
SPEC = "name: {name}\nranks: 1\ncommand: [sleep, '{seconds}']\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TlsCluster(unittest.TestCase):
    """A TLS cluster of `ringmaster up` for a class's tests, and requests."""

    @classmethod
    def setUpClass(cls):
        cls.bins = bin_dir()
        cls.root = tempfile.mkdtemp(prefix="http-api-",
                                    dir=os.environ.get("TEST_TMPDIR", "/var/tmp"))
        cls.state = os.path.join(cls.root, "cluster")
        cls.address = f"127.0.0.1:{free_port()}"
        ranks = ["--rank-user", "root"] if os.geteuid() == 0 else []
        up = cls.cli("up", "--workers", "1", "--slots", "4", "--state-dir", cls.state,
                     "-o", "json", *ranks)
        if up.returncode != 0:
            raise RuntimeError(f"ringmaster up: {up.stderr}")
        cls.url = json.loads(up.stdout)["http"] + "/api/v1"
        cls.ca = os.path.join(cls.state, "tls", "ca.crt")
        issued = subprocess.run(
            [f"{cls.bins}/coordinator/ringmaster-coordinator", "--state-dir",
             os.path.join(cls.state, "coordinator"), "--issue-user-token", "bob"],
            capture_output=True, text=True, check=True)
        cls.bob = issued.stdout.strip()

    @classmethod
    def tearDownClass(cls):
        cls.cli("down", "--state-dir", cls.state)

    @classmethod
    def cli(cls, *args):
        env = dict(os.environ, RINGMASTER_TOKEN=ADMIN_TOKEN)
        return subprocess.run([f"{cls.bins}/client/ringmaster", "--coordinator", cls.address,
                               *args], capture_output=True, text=True, timeout=120, env=env)

    def curl(self, verb, path, token=ADMIN_TOKEN, body=None, content_type="application/json",
             headers=()):
        """(HTTP status, parsed JSON body) of one request."""
        argv = ["curl", "-sS", "--cacert", self.ca, "-X", verb, "-o", "-", "-w",
                "\n%{http_code}", self.url + path]
        if token:
            argv += ["-H", f"Authorization: Bearer {token}"]
        if body is not None:
            if content_type:
                argv += ["-H", f"Content-Type: {content_type}"]
            argv += ["--data-binary", "@-"]
        for header in headers:
            argv += ["-H", header]
        done = subprocess.run(argv, input=body, capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        text, status = done.stdout.rsplit("\n", 1)
        return int(status), json.loads(text) if text.startswith("{") else text

    def submit(self, name, seconds=300, token=ADMIN_TOKEN):
        status, body = self.curl("POST", "/jobs", token, SPEC.format(name=name, seconds=seconds),
                                 "application/yaml")
        self.assertEqual(status, 200, body)
        return body["jobId"]

    def submit_yaml(self, spec):
        status, body = self.curl("POST", "/jobs", ADMIN_TOKEN, spec, "application/yaml")
        self.assertEqual(status, 200, body)
        return body["jobId"]

    def wait_state(self, job_id, *states):
        def reached():
            status, job = self.curl("GET", f"/jobs/{job_id}")
            return job if status == 200 and job["state"] in states else None
        return wait_for(reached, 60, f"job {job_id} in {states}")


class HttpApiTest(TlsCluster):
    def test_jobs_routes_from_submit_to_delete(self):
        job_id = self.submit("routes")
        status, job = self.curl("GET", f"/jobs/{job_id}")
        self.assertEqual(status, 200)
        self.assertEqual(job["spec"]["name"], "routes")
        self.assertEqual(job["owner"], "admin")
        running = self.wait_state(job_id, "RUNNING")
        self.assertEqual(running["worldSize"], 1)
        status, progress = self.curl("GET", f"/jobs/{job_id}/progress")
        self.assertEqual(status, 200, progress)  # `sleep` reports none: no points
        self.assertEqual(progress.get("points", []), [])
        status, missing = self.curl("GET", "/jobs/no-such-2/progress")
        self.assertEqual((status, missing["status"]), (404, "NOT_FOUND"))
        status, page = self.curl("GET", "/jobs?state=RUNNING&pageSize=50")
        self.assertEqual(status, 200)
        self.assertIn(job_id, [j["id"] for j in page["jobs"]])
        status, stacks = self.curl("POST", f"/jobs/{job_id}:dumpStacks")
        self.assertEqual(status, 200, stacks)
        status, cancelled = self.curl("POST", f"/jobs/{job_id}:cancel")
        self.assertEqual(status, 200, cancelled)
        self.wait_state(job_id, "CANCELLED")
        status, requeued = self.curl("POST", f"/jobs/{job_id}:requeue")
        self.assertEqual(status, 200, requeued)
        self.assertEqual(requeued["attempt"], 1)
        self.curl("POST", f"/jobs/{job_id}:cancel")
        self.wait_state(job_id, "CANCELLED")

        def deleted():
            return self.curl("DELETE", f"/jobs/{job_id}")[0] == 200
        wait_for(deleted, 60, "the ended job's ranks to stop, and its deletion")
        status, gone = self.curl("GET", f"/jobs/{job_id}")
        self.assertEqual((status, gone["status"]), (404, "NOT_FOUND"))

    def test_a_pending_job_is_held_released_and_reprioritised(self):
        status, _ = self.curl("POST", "/workers/local-0:cordon", body='{"reason": "hold test"}')
        self.assertEqual(status, 200)
        try:
            job_id = self.submit("waits")
            status, held = self.curl("POST", f"/jobs/{job_id}:hold")
            self.assertEqual((status, held["heldBy"]), (200, "admin"))
            status, released = self.curl("POST", f"/jobs/{job_id}:release")
            self.assertEqual(status, 200)
            self.assertNotIn("heldBy", released)
            status, raised = self.curl("POST", f"/jobs/{job_id}:setPriority",
                                       body='{"priority": "high"}')
            self.assertEqual((status, raised["spec"]["priority"]), (200, "high"), raised)
            self.curl("POST", f"/jobs/{job_id}:cancel")
        finally:
            status, _ = self.curl("POST", "/workers/local-0:uncordon")
            self.assertEqual(status, 200)

    def test_workers_queues_and_code(self):
        status, workers = self.curl("GET", "/workers")
        self.assertEqual(status, 200)
        self.assertEqual([w["id"] for w in workers["workers"]], ["local-0"])
        self.assertEqual(workers["workers"][0]["slots"], 4)
        status, queues = self.curl("GET", "/queues")
        self.assertEqual(status, 200)
        self.assertEqual(queues["queues"][0]["name"], "default")
        status, code = self.curl("GET", "/code/" + "0" * 64)
        self.assertEqual(status, 200, code)
        self.assertNotIn("stored", code)  # false: left out, as protobuf's JSON mapping has it

    def test_errors_name_their_code_with_the_matching_status(self):
        status, body = self.curl("GET", "/jobs", token=None)
        self.assertEqual((status, body["status"]), (401, "UNAUTHENTICATED"))
        self.assertIn("no credential given", body["message"])
        status, body = self.curl("GET", "/jobs", token="not-a-credential")
        self.assertEqual((status, body["status"]), (401, "UNAUTHENTICATED"))
        status, body = self.curl("GET", "/jobs/no-such-7")
        self.assertEqual((status, body["code"]), (404, 5))
        status, body = self.curl("POST", "/jobs", body="name: bad\nranks: 0\ncommand: [x]\n",
                                 content_type="application/yaml")
        self.assertEqual((status, body["status"]), (400, "INVALID_ARGUMENT"))
        self.assertIn("ranks", body["message"])
        status, body = self.curl("POST", "/jobs", body='{"name": "x", "rankz": 1}')
        self.assertEqual(status, 400)
        self.assertIn("the body is not a JobSpec in JSON", body["message"])
        status, body = self.curl("GET", "/jobs?colour=red")
        self.assertEqual(status, 400)
        self.assertIn("\"colour\" is not a field of ListJobsRequest", body["message"])
        status, body = self.curl("PUT", "/jobs")
        self.assertEqual(status, 405)
        status, body = self.curl("GET", "/nothing-here")
        self.assertEqual(status, 404)
        status, body = self.curl("POST", "/jobs", body="x" * (2 << 20),
                                 content_type="application/yaml")
        self.assertEqual((status, body["status"]), (413, "RESOURCE_EXHAUSTED"))

    def test_what_a_browser_or_a_forger_sends_is_refused_and_the_coordinator_stays(self):
        # gRPC takes only visible ASCII in metadata, and aborts on the rest.
        status, body = self.curl("GET", "/jobs", token="caf\u00e9-not-ascii")
        self.assertEqual((status, body["status"]), (401, "UNAUTHENTICATED"))
        self.assertIn("Bearer <token>", body["message"])
        status, body = self.curl("GET", "/jobs", token="two\twords")
        self.assertEqual(status, 400, "a control byte in a header: civetweb refuses the request")
        # Another site's page, with what the browser holds.
        status, body = self.curl("POST", "/jobs", body=SPEC.format(name="csrf", seconds=1),
                                 content_type="application/yaml",
                                 headers=["Origin: https://evil.example"])
        self.assertEqual((status, body["status"]), (403, "PERMISSION_DENIED"))
        self.assertIn("another origin (https://evil.example)", body["message"])
        # A form's body (a "simple" request a page may send anywhere).
        status, body = self.curl("POST", "/jobs", body=SPEC.format(name="form", seconds=1),
                                 content_type="text/plain")
        self.assertEqual((status, body["status"]), (400, "INVALID_ARGUMENT"))
        self.assertIn("Content-Type: application/json or application/yaml", body["message"])
        # A spec of a few kilobytes whose aliases stand for gigabytes.
        bomb = "name: bomb\nranks: 1\ncommand: &l0 [" + ", ".join(["'" + "x" * 1000 + "'"] * 10)
        bomb += "]\n"
        for level in range(1, 7):
            bomb += f"env{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 10) + "]\n"
        status, body = self.curl("POST", "/jobs", body=bomb, content_type="application/yaml")
        self.assertEqual(status, 400, body)
        self.assertIn("once its YAML aliases are read", body["message"])
        status, _ = self.curl("GET", "/queues")
        self.assertEqual(status, 200, "the coordinator still answers")

    def test_another_user_sees_a_job_redacted_and_may_not_change_it(self):
        job_id = self.submit("admins", seconds=300)
        status, seen = self.curl("GET", f"/jobs/{job_id}", token=self.bob)
        self.assertEqual(status, 200)
        self.assertEqual(seen["owner"], "admin")
        self.assertNotIn("command", seen.get("spec", {}), "another's command is not shown")
        status, body = self.curl("POST", f"/jobs/{job_id}:cancel", token=self.bob)
        self.assertEqual((status, body["status"]), (403, "PERMISSION_DENIED"))
        self.assertIn("user bob may not cancel job", body["message"])
        status, body = self.curl("POST", "/workers/local-0:cordon", token=self.bob,
                                 body='{"reason": "mine now"}')
        self.assertEqual((status, body["status"]), (403, "PERMISSION_DENIED"))
        status, body = self.curl("POST", "/workers/local-0:drain", token=self.bob, body="{}")
        self.assertEqual(status, 403)
        own = self.submit("bobs", seconds=1, token=self.bob)
        status, mine = self.curl("GET", f"/jobs/{own}", token=self.bob)
        self.assertEqual((status, mine["owner"]), (200, "bob"))
        self.assertEqual(mine["spec"]["command"], ["sleep", "1"])
        self.curl("POST", f"/jobs/{job_id}:cancel")

    def test_the_openapi_document_lists_every_route(self):
        status, document = self.curl("GET", "/openapi.json", token=None)
        self.assertEqual(status, 200)
        self.assertEqual(document["openapi"], "3.0.3")
        paths = document["paths"]
        for path, verb in [("/api/v1/jobs", "post"), ("/api/v1/jobs/{job_id}:cancel", "post"),
                           ("/api/v1/workers/{worker_id}:drain", "post"),
                           ("/api/v1/jobs/{job_id}/logs", "get"), ("/api/v1/queues", "get")]:
            self.assertIn(verb, paths[path], path)
        self.assertIn("ringmaster.v1.JobSpec", document["components"]["schemas"])

    def events(self, path, last_event_id=None, count=None, until=None):
        """The Server-Sent Events of a stream, as (id, data) pairs: the first
        `count` of them, those up to the first for which `until` holds, or
        all until the stream ends. The `end` event that says the stream
        ended is not one of them: it sets self.ended."""
        argv = ["curl", "-sS", "-N", "--cacert", self.ca, "-H",
                f"Authorization: Bearer {ADMIN_TOKEN}", self.url + path]
        if last_event_id:
            argv += ["-H", f"Last-Event-ID: {last_event_id}"]
        curl = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        events, fields = [], {}
        self.ended = False
        try:
            for line in curl.stdout:
                line = line.rstrip("\n")
                if line:
                    name, _, value = line.partition(": ")
                    fields[name] = value
                    continue
                if fields.get("event") == "end":
                    self.ended = True
                elif "data" in fields:
                    events.append((fields.get("id"), json.loads(fields["data"])))
                fields = {}
                if count is not None and len(events) >= count:
                    break
                if until is not None and events and until(events[-1][1]):
                    break
        finally:
            curl.kill()
            curl.wait()
            curl.stdout.close()
        return events

    def test_logs_stream_as_events_and_resume_from_the_last_one_seen(self):
        job_id = self.submit_yaml(
            "name: counts\nranks: 1\ncommand: [sh, -c, 'for i in $(seq 1 30); do echo line $i; "
            "sleep 0.1; done']\n")
        first = self.events(f"/jobs/{job_id}/logs?follow=true", count=5)
        self.assertEqual(len(first), 5)
        last_id = first[-1][0]
        self.assertTrue(last_id, first)
        rest = self.events(f"/jobs/{job_id}/logs?follow=true", last_event_id=last_id)
        text = "".join(base64.b64decode(e[1].get("data", "")).decode() for e in first + rest)
        self.assertEqual(text, "".join(f"line {i}\n" for i in range(1, 31)),
                         "nothing repeated or lost across the reconnection")
        self.assertTrue(self.ended, "the stream said it ended")
        self.assertEqual(self.wait_state(job_id, "SUCCEEDED")["state"], "SUCCEEDED")

    def test_one_caller_holds_at_most_32_streams(self):
        self.submit("streamed", seconds=60)
        streams = []
        try:
            for _ in range(32):
                streams.append(subprocess.Popen(
                    ["curl", "-sN", "--cacert", self.ca, "-H", f"Authorization: Bearer {self.bob}",
                     self.url + "/jobs:watch"], stdout=subprocess.PIPE))
            for curl in streams:  # each has its first event: its place is taken
                self.assertTrue(curl.stdout.readline(), "a stream that ended at once")
            status, refused = self.curl("GET", "/jobs:watch", self.bob)
            self.assertEqual((status, refused["status"]), (429, "RESOURCE_EXHAUSTED"), refused)
            self.assertIn("32 streams", refused["message"])
            admin = self.events("/jobs:watch", count=1)
            self.assertEqual(len(admin), 1, "another caller still has room")
        finally:
            for curl in streams:
                curl.kill()
                curl.wait()
                curl.stdout.close()

    def test_jobs_stream_as_events_that_resume(self):
        seen = self.events("/jobs:watch", count=1)
        self.assertEqual(len(seen), 1)
        token = seen[0][0]
        job_id = self.submit("watched", seconds=1)
        after = self.events("/jobs:watch", last_event_id=token,
                            until=lambda e: e["job"]["id"] == job_id)
        # Changes that come together are one event: the job as it is then.
        self.assertIn(after[-1][1]["job"]["state"], ("PENDING", "STARTING", "RUNNING", "SUCCEEDED"))
        self.assertNotIn(token, [e[0] for e in after], "the events after the token, not it")
        status, body = self.curl("GET", "/jobs/no-such-3:watch")
        self.assertEqual((status, body["status"]), (404, "NOT_FOUND"))


class ClientCertificateTest(TlsCluster):
    def cert_curl(self, name, verb, path, body=None):
        tls = os.path.join(self.state, "tls")
        argv = ["curl", "-sS", "--cacert", self.ca, "--cert", f"{tls}/{name}.crt", "--key",
                f"{tls}/{name}.key", "-X", verb, "-o", "-", "-w", "\n%{http_code}",
                self.url + path]
        if body is not None:
            argv += ["-H", "Content-Type: application/json", "--data-binary", body]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        text, status = done.stdout.rsplit("\n", 1)
        return int(status), json.loads(text)

    def test_a_client_certificate_is_a_credential_over_https(self):
        made = self.cli("certs", "init", "--dir", os.path.join(self.state, "tls"),
                        "--user", "carol")
        self.assertEqual(made.returncode, 0, made.stderr)
        job_id = self.submit("by-token")
        status, job = self.cert_curl("admin", "GET", f"/jobs/{job_id}")
        self.assertEqual((status, job["spec"]["command"]), (200, ["sleep", "300"]))
        status, session = self.cert_curl("admin", "GET", "/session")
        self.assertEqual((status, session["user"]), (200, "admin"), session)

        status, seen = self.cert_curl("user-carol", "GET", f"/jobs/{job_id}")
        self.assertEqual(status, 200, seen)
        self.assertTrue(seen["specRedacted"], "carol sees the admin's job redacted")
        self.assertNotIn("command", seen["spec"])
        status, refused = self.cert_curl("user-carol", "POST", "/workers/local-0:cordon", "{}")
        self.assertEqual((status, refused["status"]), (403, "PERMISSION_DENIED"), refused)
        status, refused = self.cert_curl("user-carol", "POST", f"/jobs/{job_id}:cancel")
        self.assertEqual(status, 403, refused)
        # A certificate of no caller (a worker's) is no credential here.
        status, refused = self.cert_curl("worker-local-0", "GET", "/jobs")
        self.assertEqual(status, 401, refused)
        self.curl("POST", f"/jobs/{job_id}:cancel")


class ConsoleSignInTest(TlsCluster):
    """The console's session, as a browser holds it: a cookie jar."""

    def setUp(self):
        self.jar = os.path.join(self.root, f"cookies-{self.id().rsplit('.', 1)[-1]}")
        self.base = self.url[:-len("/api/v1")]

    def ui(self, *args, token=ADMIN_TOKEN):
        env = dict(os.environ, RINGMASTER_TOKEN=token,
                   RINGMASTER_TLS_DIR=os.path.join(self.state, "tls"))
        done = subprocess.run([f"{self.bins}/client/ringmaster", "--coordinator", self.address,
                               "ui", "-o", "json", *args], capture_output=True, text=True,
                              timeout=60, env=env)
        self.assertEqual(done.returncode, 0, done.stderr)
        return json.loads(done.stdout)

    def browse(self, verb, url, headers=(), body=None, ca=True, form=None):
        """(status, response headers, body) of a request with the jar."""
        argv = ["curl", "-sS", "-X", verb, "-b", self.jar, "-c", self.jar, "-D", "-", url]
        if form is not None:
            argv += ["--data-raw", form]
        if ca:
            argv += ["--cacert", self.ca]
        for header in headers:
            argv += ["-H", header]
        if body is not None:
            argv += ["-H", "Content-Type: application/json", "--data-binary", body]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        head, _, text = done.stdout.partition("\n\n")
        status = int(head.split(" ", 2)[1])
        return status, head, text

    def csrf(self):
        with open(self.jar) as f:
            for line in f:
                fields = line.rstrip("\n").split("\t")
                if len(fields) == 7 and fields[5] == "ringmaster_csrf":
                    return fields[6]
        return ""

    def sign_in(self, url, ca=True):
        """The page `ringmaster ui`'s URL shows, then its form sent: the
        response headers of the sign-in."""
        status, _, page = self.browse("GET", url, ca=ca)
        self.assertEqual(status, 200, page)
        code = re.search(r'name="code" value="([^"]+)"', page).group(1)
        status, head, text = self.browse("POST", url.split("?")[0], ca=ca,
                                         form=f"code={code}")
        self.assertEqual(status, 303, text)
        return head, page

    def test_ui_url_signs_in_once_and_changes_need_the_csrf_token(self):
        login = self.ui()
        self.assertEqual(login["user"], "admin")
        self.assertTrue(login["url"].startswith(self.base + "/login?code="), login)
        head, page = self.sign_in(login["url"])
        self.assertIn('as <b id="login-user">admin</b>?', page, "it asks before signing in")
        self.assertIn("Location: /\n", head)
        session = re.search(r"Set-Cookie: ringmaster_session=[^\n]*", head).group(0)
        for attribute in ("HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=4319"):
            self.assertIn(attribute, session)
        code = login["url"].split("code=")[1]
        for verb, url, form in (("GET", login["url"], None),
                                ("POST", self.base + "/login", f"code={code}")):
            status, _, text = self.browse(verb, url, form=form)
            self.assertEqual(status, 401, text)
            self.assertIn("used already", text)

        status, _, text = self.browse("GET", self.url + "/session")
        self.assertEqual((status, json.loads(text)["user"]), (200, "admin"), text)
        job_id = self.submit("console-csrf")
        status, _, text = self.browse("POST", f"{self.url}/jobs/{job_id}:cancel")
        self.assertEqual(status, 403, text)
        self.assertIn("X-CSRF-Token", json.loads(text)["message"])
        status, _, text = self.browse("POST", f"{self.url}/jobs/{job_id}:cancel",
                                      headers=["X-CSRF-Token: forged"])
        self.assertEqual(status, 403, text)
        status, _, text = self.browse("POST", f"{self.url}/jobs/{job_id}:cancel",
                                      headers=[f"X-CSRF-Token: {self.csrf()}"])
        self.assertEqual((status, json.loads(text)["state"]), (200, "CANCELLED"), text)

        # A session opens no other: one stolen ends when it expires.
        status, _, text = self.browse("POST", self.url + "/console/logins",
                                      headers=[f"X-CSRF-Token: {self.csrf()}"])
        self.assertEqual(status, 403, text)
        self.assertIn("cannot open another", text)
        with open(self.jar) as f:
            token = [line.split("\t")[6].strip() for line in f
                     if "\tringmaster_session\t" in line][0]
        status, _, text = self.browse("POST", self.url + "/session",
                                      body=json.dumps({"token": token}))
        self.assertEqual(status, 403, text)

        status, head, _ = self.browse("DELETE", self.url + "/session",
                                      headers=[f"X-CSRF-Token: {self.csrf()}"])
        self.assertEqual(status, 200)
        self.assertIn("ringmaster_session=; Path=/; Max-Age=0", head)
        self.assertIn("ringmaster_csrf=; Path=/; Max-Age=0", head)

    def test_ui_open_passes_the_browser_no_code_on_its_command_line(self):
        browser = os.path.join(self.root, "browser.sh")
        seen = os.path.join(self.root, "browser-saw")
        with open(browser, "w") as f:
            f.write(f'#!/bin/sh\necho "$@" > {seen}.argv\n'
                    f'stat -c %a "${{1#file://}}" > {seen}.mode\ncat "${{1#file://}}" > {seen}\n')
        os.chmod(browser, 0o755)
        env = dict(os.environ, RINGMASTER_TOKEN=ADMIN_TOKEN, BROWSER=browser,
                   HOME=self.root, XDG_RUNTIME_DIR="",
                   RINGMASTER_TLS_DIR=os.path.join(self.state, "tls"))
        done = subprocess.run([f"{self.bins}/client/ringmaster", "--coordinator", self.address,
                               "ui", "--open", "-o", "json"], capture_output=True, text=True,
                              timeout=60, env=env)
        self.assertEqual(done.returncode, 0, done.stderr)
        url = json.loads(done.stdout)["url"]
        with open(seen + ".argv") as f:
            argv = f.read()
        self.assertNotIn("code=", argv)
        self.assertTrue(argv.startswith("file://"), argv)
        with open(seen + ".mode") as f:
            self.assertEqual(f.read().strip(), "600")
        with open(seen) as f:
            self.assertIn(f'url={url}"', f.read(), "the page sends the browser on to the URL")

    def test_a_token_pasted_opens_a_session_of_its_user(self):
        status, _, text = self.browse("POST", self.url + "/session", body='{"token": "wrong"}')
        self.assertEqual(status, 401, text)
        # A cookie no longer good (a rotated key, another cluster's) is
        # forgotten, and keeps no one from signing in.
        bad = ["Cookie: ringmaster_session=rms.1.admin.00"]
        status, head, text = self.browse("GET", self.url + "/session", headers=bad)
        self.assertEqual(status, 401, text)
        self.assertIn("ringmaster_session=; Path=/; Max-Age=0", head)
        status, _, text = self.browse("POST", self.url + "/session", headers=bad,
                                      body=json.dumps({"token": self.bob}))
        self.assertEqual(status, 200, text)
        self.assertEqual((json.loads(text)["user"], json.loads(text)["admin"]), ("bob", False))
        status, _, text = self.browse("GET", self.url + "/session")
        self.assertEqual(json.loads(text)["user"], "bob")
        status, _, text = self.browse("POST", self.url + "/workers/local-0:cordon",
                                      headers=[f"X-CSRF-Token: {self.csrf()}"], body="{}")
        self.assertEqual(status, 403, "an admin verb, refused to bob's session")

    def test_the_console_is_served_with_a_strict_policy_and_no_inline_script(self):
        status, head, page = self.browse("GET", self.base + "/")
        self.assertEqual(status, 200)
        self.assertIn("Content-Type: text/html", head)
        policy = re.search(r"Content-Security-Policy: ([^\n]*)", head).group(1)
        self.assertIn("default-src 'none'", policy)
        self.assertIn("script-src 'self';", policy)
        self.assertNotIn("unsafe", policy)
        self.assertIn("frame-ancestors 'none'", policy)
        self.assertEqual(re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", page), [],
                         "every script is a file of the origin")
        self.assertNotRegex(page, r"\son[a-z]+=", "no inline event handlers")
        status, head, script = self.browse("GET", self.base + "/console/app.js")
        self.assertEqual(status, 200)
        self.assertIn("Content-Type: text/javascript", head)
        self.assertNotIn("innerHTML", script, "text from the cluster is set as text only")
        self.assertEqual(self.browse("GET", self.base + "/console/none.js")[0], 404)
        self.assertEqual(self.browse("POST", self.base + "/", body="{}")[0], 405)

    def test_ui_proxy_serves_the_console_without_the_clusters_ca(self):
        env = dict(os.environ, RINGMASTER_TOKEN=ADMIN_TOKEN,
                   RINGMASTER_TLS_DIR=os.path.join(self.state, "tls"))
        proxy = subprocess.Popen([f"{self.bins}/client/ringmaster", "--coordinator", self.address,
                                  "ui", "--proxy", "-o", "json"], stdout=subprocess.PIPE,
                                 text=True, env=env)
        try:
            login = json.loads(proxy.stdout.readline())
            self.assertTrue(login["url"].startswith("http://127.0.0.1:"), login)
            head, _ = self.sign_in(login["url"], ca=False)
            self.assertNotIn("Secure", head, "cookies for http://127.0.0.1, the browser's side")
            origin = login["url"].split("/login")[0]
            status, _, text = self.browse("GET", origin + "/api/v1/session", ca=False)
            self.assertEqual((status, json.loads(text)["user"]), (200, "admin"), text)
        finally:
            proxy.terminate()
            self.assertEqual(proxy.wait(timeout=30), 0, "Ctrl-C ends the proxy cleanly")
            proxy.stdout.close()


if __name__ == "__main__":
    unittest.main()
