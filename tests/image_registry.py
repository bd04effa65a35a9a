"""A private image registry for tests: Debian's docker-registry (the CNCF
distribution) with TLS and an htpasswd user, and images built with
buildah from a root file system, pushed to it. The Python twin of
testing/registry_server.h, for the tests that run on simulated hosts.

    registry = Registry(directory, "10.0.0.1:5000", spawn=hosts_popen)
    registry.push_rootfs("team/torch:1.13", "/var/cache/ringmaster-test/rootfs/torch")
    worker flags: --registry-auth registry.auth_file, --registry-certs registry.certs_dir

Needs root, docker-registry, buildah, openssl, htpasswd (apache2-utils) and
curl; `unavailable()` says which is missing. close() stops the registry.
"""
import base64
import json
import os
import shutil
import subprocess
import time

TOOLS = ("docker-registry", "buildah", "openssl", "htpasswd", "curl")


def unavailable():
    """Why a registry cannot be had here, or None."""
    if os.geteuid() != 0:
        return "a registry needs root (buildah's storage)"
    for tool in TOOLS:
        if shutil.which(tool) is None:
            return f"{tool} is not installed (./dev test installs it)"
    return None


def _run(argv, **kwargs):
    r = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}: {r.stdout}{r.stderr}")
    return r.stdout


class Registry:
    """A registry serving at `address` (IP:PORT), its files in `directory`.
    `spawn(argv, log)` starts it (in a simulated host, for instance); by
    default here."""

    def __init__(self, directory, address, user="team", password="secret", spawn=None):
        self.dir = directory
        self.address = address
        host = address.rsplit(":", 1)[0]
        self.certs_dir = os.path.join(directory, "certs")
        os.makedirs(os.path.join(self.certs_dir, address), exist_ok=True)
        d = directory
        _run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
              f"{d}/ca.key", "-out", f"{d}/ca.crt", "-days", "2", "-subj", "/CN=registry-test-ca"])
        _run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{d}/registry.key",
              "-out", f"{d}/registry.csr", "-subj", f"/CN={host}"])
        with open(f"{d}/san.ext", "w") as f:
            f.write(f"subjectAltName=IP:{host}\n")
        _run(["openssl", "x509", "-req", "-in", f"{d}/registry.csr", "-CA", f"{d}/ca.crt",
              "-CAkey", f"{d}/ca.key", "-CAcreateserial", "-out", f"{d}/registry.crt", "-days",
              "2", "-extfile", f"{d}/san.ext"])
        shutil.copy(f"{d}/ca.crt", os.path.join(self.certs_dir, address, "ca.crt"))
        with open(f"{d}/htpasswd", "w") as f:
            f.write(_run(["htpasswd", "-Bbn", user, password]))
        with open(f"{d}/config.yml", "w") as f:
            f.write(f"version: 0.1\nlog: {{level: warn}}\n"
                    f"storage:\n  filesystem: {{rootdirectory: {d}/data}}\n"
                    f"http:\n  addr: {address}\n"
                    f"  tls: {{certificate: {d}/registry.crt, key: {d}/registry.key}}\n"
                    f"auth:\n  htpasswd: {{realm: test, path: {d}/htpasswd}}\n")
        self.auth_file = os.path.join(d, "auth.json")
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        with open(self.auth_file, "w") as f:
            json.dump({"auths": {address: {"auth": token}}}, f)
        self.user, self.password = user, password
        self.log = open(f"{d}/registry.log", "ab")
        argv = ["docker-registry", "serve", f"{d}/config.yml"]
        self.process = (spawn(argv, self.log) if spawn else
                        subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT))
        # /v2/ answers 401 without credentials once it serves.
        deadline = time.monotonic() + 30
        while True:
            code = subprocess.run(
                ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert",
                 f"{d}/ca.crt", f"https://{address}/v2/"], capture_output=True, text=True).stdout
            if code == "401":
                break
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"docker-registry never answered at {address}: "
                                   f"{open(f'{d}/registry.log').read()}")
            time.sleep(0.2)

    def push_rootfs(self, name, rootfs):
        """Builds an image of the directory `rootfs` as it is and pushes it
        as ADDRESS/NAME, uncompressed (quicker to push and unpack here)."""
        image = f"{self.address}/{name}"
        buildah = ["buildah", "--root", f"{self.dir}/storage", "--runroot", f"{self.dir}/run",
                   "--storage-driver", "vfs"]
        container = _run(buildah + ["from", "scratch"]).strip()
        try:
            mount = _run(buildah + ["mount", container]).strip()
            _run(["cp", "-a", f"{rootfs}/.", f"{mount}/"])
            _run(buildah + ["config", "--entrypoint", '["/bin/false"]', container])
            _run(buildah + ["commit", "-q", container, image])
        finally:
            subprocess.run(buildah + ["rm", container], capture_output=True)
        _run(buildah + ["push", "-q", "--disable-compression", "--cert-dir",
                        os.path.join(self.certs_dir, self.address), "--creds",
                        f"{self.user}:{self.password}", image, f"docker://{image}"])
        return image

    def close(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        # buildah's storage: its vfs layers are plain directories.
        subprocess.run(["buildah", "--root", f"{self.dir}/storage", "--runroot",
                        f"{self.dir}/run", "--storage-driver", "vfs", "rm", "--all"],
                       capture_output=True)
