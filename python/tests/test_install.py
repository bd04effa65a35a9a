"""`pip install` of the package into a fresh venv (--system-site-packages,
as Debian's python3-grpcio and python3-protobuf are its dependencies) with
no package index, from python/ and from the release archive; the installed
package imports outside the source tree and submits a job."""
import os
import re
import shutil
import subprocess
import tarfile

import pytest

from conftest import REPO

PYTHON = "/usr/bin/python3"


def sources(tmp_path):
    """The package's source trees to install from: python/ here, and the
    release archive's (RINGMASTER_RELEASE_ARCHIVE) when it is given."""
    found = {"python/": os.path.join(REPO, "python")}
    archive = os.environ.get("RINGMASTER_RELEASE_ARCHIVE")
    if archive:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp_path / "release")
        (top,) = os.listdir(tmp_path / "release")
        found["release archive"] = str(tmp_path / "release" / top / "python")
    return found


def test_the_version_is_the_products():
    with open(os.path.join(REPO, "VERSION")) as f:
        version = f.read().strip()
    with open(os.path.join(REPO, "python", "pyproject.toml")) as f:
        declared = re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)
    assert declared == version


def test_pip_installs_it_offline_and_it_submits(cluster, tmp_path):
    if subprocess.run([PYTHON, "-m", "venv", "--help"], capture_output=True).returncode != 0:
        pytest.fail("python3 -m venv is missing: install python3-venv (./dev test does)")
    if "RINGMASTER_RELEASE_ARCHIVE" not in os.environ and "TEST_SRCDIR" in os.environ:
        pytest.fail("RINGMASTER_RELEASE_ARCHIVE is not set by the test's wrapper")
    for where, source in sources(tmp_path).items():
        # A copy: pip writes its build files beside the sources.
        tree = tmp_path / ("src-" + where.replace("/", "").replace(" ", "-"))
        shutil.copytree(source, tree, symlinks=False)
        venv = tmp_path / ("venv-" + tree.name)
        subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", str(venv)], check=True)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_INDEX_URL")}
        env["PIP_NO_INDEX"] = "1"  # no network
        install = subprocess.run(
            [str(venv / "bin/pip"), "install", "--no-index", "--disable-pip-version-check",
             str(tree)], capture_output=True, text=True, env=env, cwd=tmp_path)
        assert install.returncode == 0, f"{where}: {install.stdout}\n{install.stderr}"
        script = f"""
import ringmaster
print(ringmaster.__file__)
with ringmaster.Client({cluster.address!r}, tls_dir={cluster.tls_dir!r}) as client:
    job_id = client.submit({{"name": "installed", "ranks": 1, "command": ["true"]}},
                           upload=False)
    print(job_id, ringmaster.v1.job_pb2.JobState.Name(client.wait(job_id, timeout=60).state))
"""
        run = subprocess.run([str(venv / "bin/python"), "-c", script], capture_output=True,
                             text=True, env=env, cwd=tmp_path)
        assert run.returncode == 0, f"{where}: {run.stderr}"
        path, result = run.stdout.splitlines()
        assert path.startswith(str(venv)), f"{where}: imported {path}, not the installed one"
        assert result.endswith(" SUCCEEDED"), f"{where}: {result}"
