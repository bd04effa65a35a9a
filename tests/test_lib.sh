# Sourced by the shell tests: how they skip, fail and find a port.
skip() { echo "SKIPPED: $*"; exit 0; }
fail() { echo "FAIL: $*"; exit 1; }
# A TCP port free on every address of this host (when asked).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

# A free port whose next one is free too: a daemon's, with /metrics on the
# next (deploy/slurm/ringmaster.sbatch).
free_port_pair() {
  python3 -c '
import socket
while True:
    a, b = socket.socket(), socket.socket()
    a.bind(("", 0))
    try:
        b.bind(("", a.getsockname()[1] + 1))
        print(a.getsockname()[1])
        break
    except OSError:
        pass
    finally:
        a.close(); b.close()
'
}
