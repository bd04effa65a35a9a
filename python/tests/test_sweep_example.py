"""examples/sweep.py against the local cluster: 8 trainer jobs over the
grid, followed by one watch_jobs, and the best accuracy reported."""
import os
import re
import subprocess

from conftest import REPO


def test_the_sweep_runs_its_grid_and_reports_the_best(cluster):
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    run = subprocess.run(
        ["/usr/bin/python3", os.path.join(REPO, "examples/sweep.py"), "--coordinator",
         cluster.address, "--tls-dir", cluster.tls_dir, "--epochs", "2"],
        capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"^sweep [0-9a-f]{8}: submitted 8 jobs$", run.stdout, re.M)
    final = run.stdout.split("job ")[-1].splitlines()[1:9]
    assert len(final) == 8 and all(" SUCCEEDED " in row for row in final), run.stdout
    rows = {(row.split()[1], row.split()[2]): float(row.split()[-1]) for row in final}
    assert sorted(rows) == sorted((lr, b) for lr in ("0.0005", "0.001", "0.003", "0.01")
                                  for b in ("32", "128"))
    best = re.search(r"^best: \S+: accuracy (\S+) with lr (\S+), batch size (\d+)$",
                     run.stdout, re.M)
    assert best, run.stdout
    assert float(best.group(1)) == max(rows.values())
    assert rows[(best.group(2), best.group(3))] == float(best.group(1))
